"""``python -m lnviz.data.examples``: write the Model inspector's example files again."""

from lnviz.data.examples import write_examples

for path in write_examples():
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
