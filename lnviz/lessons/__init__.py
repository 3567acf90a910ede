"""One module per lesson: the facts behind its page (numbers, verdicts, ranks), no widgets."""
