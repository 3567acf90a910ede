"""The Start-here path's ways into the app's pages: the URL key of its step, the links from
each step into the concept pages (page paths and their URL keys, which only the app knows), and
the way back from a concept page to its step: one line at the end of each page."""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from lnviz.data.presets import PRESETS
from lnviz.lessons.start_here import OUTLINE, STACK, Outline, Question
from lnviz.terms import Layout, NormKind

#: The path's page, as the navigation knows it.
PATH_PAGE = "app_pages/start_here.py"
#: The URL key of the step the learner is on (the tab's label).
STEP_KEY = "sp_step"


@dataclass(frozen=True)
class Link:
    """A link into a concept page, opened on one view: its settings as URL parameters."""

    page: str
    label: str
    query: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The page's name: "app_pages/bn_vs_ln.py" → "bn_vs_ln"."""
        return self.page.removeprefix("app_pages/").removesuffix(".py")



#: Each step's links into the pages that go deeper, by its number, each opened on one view.
PATH_LINKS: dict[int, tuple[Link, ...]] = {
    1: (
        Link("app_pages/bn_vs_ln.py",
             "BatchNorm vs LayerNorm, part 4: why does BatchNorm help? The story and the "
             "evidence"),
    ),
    2: (
        Link("app_pages/explorer.py", "Explorer: “I” through LayerNorm, step by step",
             {"preset": PRESETS["one_two_three"].name, "norm": NormKind.LAYER}),
        Link("app_pages/gradients.py",
             "Gradients and invariances: what rescaling a token leaves unchanged"),
    ),
    3: (
        Link("app_pages/explorer.py",
             "Explorer: the two-sentence batch through BatchNorm, pad counted, feature 0 step by "
             "step",
             {"preset": PRESETS["padded_tokens"].name, "norm": NormKind.BATCH,
              "usemask": "false"}),
        Link("app_pages/bn_vs_ln.py",
             "BatchNorm vs LayerNorm: which values share one μ and σ, for tokens",
             {"bl_layout": Layout.NLC}),
    ),
    4: (
        Link("app_pages/padding.py",
             "Padding and sequences: the two-sentence batch with and without the pad"),
    ),
    5: (
        Link("app_pages/bn_vs_ln.py",
             "BatchNorm vs LayerNorm: one sample in many batches of 2", {"bl_b": "2"}),
        Link("app_pages/efficientnet.py",
             "BatchNorm in a real network: a photo alone in its batch, and its batch-mates",
             {"en_part2": "true"}),
    ),
    6: (
        Link("app_pages/epsilon.py",
             "ε and numerical stability: a tiny σ² against a small ε",
             {"ep_vec": "tiny", "ep_eps": "1e-8"}),
        Link("app_pages/padding.py", "Padding and sequences: the pad token at ε = 0",
             {"pd_eps": "0"}),
    ),
    7: (
        Link("app_pages/scale_shift.py",
             "Scale and shift: γ and β, and when they can undo the normalization"),
    ),
    8: (
        Link("app_pages/shapes.py",
             f"Shapes and transformer blocks: the stream through {STACK.depth} blocks",
             {"sh_depth": str(STACK.depth), "sh_dmodel": str(STACK.d_model)}),
        Link("app_pages/beyond.py",
             "Beyond LayerNorm: what shape a real model's LayerNorms make of their input, and "
             "what replacing them does"),
        Link("app_pages/placement.py",
             "Where the norm sits: Peri-LN and OLMo-2's placements at initialization, and "
             "QK-norm on a real attention head"),
    ),
}


def answer_key(question: Question) -> str:
    """The URL key of a question's answer (``sp_<name>``)."""
    return f"sp_{question.name}"


def links_of(outline: Outline) -> tuple[Link, ...]:
    """The links of a step of the path into the pages that go deeper."""
    return PATH_LINKS[outline.number]


def outline_for_page(page: str) -> Outline | None:
    """The first step of the path that links to ``page`` ("bn_vs_ln"), or None."""
    return next((o for o in OUTLINE if any(link.name == page for link in links_of(o))), None)


def path_link(page: str) -> None:
    """A link back to the step of the Start-here path that sends learners to ``page`` (its
    name: "bn_vs_ln"), opened on that step."""
    outline = outline_for_page(page)
    if outline is None:
        raise ValueError(f"no step of the Start-here path links to {page!r}")
    st.divider()
    st.page_link(PATH_PAGE, query_params={STEP_KEY: outline.tab}, icon=":material/route:",
                 label=f"Part of the Start-here path: step {outline.number}, "
                       f"{outline.title} — back to it",
                 help="The twenty-minute path through normalization, opened on the step that "
                      "led here.")
