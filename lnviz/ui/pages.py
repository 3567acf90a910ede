"""The app's pages, grouped as the navigation shows them, with one sentence each for the home
page. One list, so the navigation and the home page's links never disagree."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageInfo:
    path: str
    title: str
    icon: str
    summary: str
    default: bool = False


#: Sections of the navigation, in order; each page file lives in app_pages/.
PAGES: dict[str, list[PageInfo]] = {
    "Explore": [
        PageInfo("app_pages/start_here.py", "Start here", ":material/route:",
                 "Eight short steps, twenty minutes: predict a number or make a choice, then "
                 "see why — from one token through LayerNorm to a transformer block.",
                 default=True),
        PageInfo("app_pages/home.py", "Home", ":material/home:",
                 "A map of the path and of every page."),
        PageInfo("app_pages/explorer.py", "Explorer", ":material/biotech:",
                 "Put any batch through any normalization and watch every number: which cells "
                 "share a mean and variance, before and after, step by step."),
        PageInfo("app_pages/inspector.py", "Model inspector", ":material/troubleshoot:",
                 "Open a model's checkpoint or a capture of its normalization layers: γ and β "
                 "per layer, outlier channels, and any layer's input in the Explorer."),
    ],
    "Concepts": [
        PageInfo("app_pages/bn_vs_ln.py", "BatchNorm vs LayerNorm", ":material/compare:",
                 "The same batch through both: which cells share statistics, how one sample's "
                 "output depends on its batch, and what changes between training and eval."),
        PageInfo("app_pages/geometry.py", "The geometry of LayerNorm", ":material/public:",
                 "Vectors of 2 or 3 features on their way to a circle: centring projects onto a "
                 "plane, scaling onto a sphere; ε, γ, β, RMSNorm and BatchNorm each change the "
                 "picture."),
        PageInfo("app_pages/padding.py", "Padding and sequences", ":material/short_text:",
                 "How pad tokens drag BatchNorm's statistics, masked BatchNorm as the repair, "
                 "and why LayerNorm over each token's features does not care."),
        PageInfo("app_pages/epsilon.py", "ε and numerical stability", ":material/functions:",
                 "Tiny variances, ε = 0, half precision, and one pass or two for the variance."),
        PageInfo("app_pages/scale_shift.py", "Scale and shift: γ and β", ":material/tune:",
                 "What the learnable γ and β do to the normalized values, and when they can "
                 "undo normalization (BatchNorm's, with frozen statistics; LayerNorm's, only one "
                 "token at a time)."),
        PageInfo("app_pages/gradients.py", "Gradients and invariances", ":material/timeline:",
                 "Backpropagation through the norms, their Jacobians, and what rescaling or "
                 "shifting the input leaves unchanged."),
        PageInfo("app_pages/shapes.py", "Shapes and transformer blocks", ":material/view_in_ar:",
                 "normalized_shape on 2-D, 3-D and 4-D tensors, and where LayerNorm sits in a "
                 "transformer block: post-LN, pre-LN or none."),
        PageInfo("app_pages/bug_zoo.py", "The bug zoo", ":material/bug_report:",
                 "Seven hand-written LayerNorms, six with a slip from real code: verify them "
                 "against torch.nn.LayerNorm on an input you pick."),
    ],
    "Experiments": [
        PageInfo("app_pages/minilm.py", "Inside a real transformer", ":material/psychology:",
                 "Type a sentence into a real pretrained model (all-MiniLM-L6-v2) and open its "
                 "13 LayerNorms: one huge number, outlier features, attention sinks, int8."),
        PageInfo("app_pages/smollm2.py", "Inside a real LLM", ":material/chat:",
                 "Type a prompt into SmolLM2-135M-Instruct, a pre-norm decoder with RMSNorm: "
                 "its next token, a massive activation, the residual stream through depth, "
                 "attention sinks, and what breaking one norm does to the prediction."),
        PageInfo("app_pages/gemma.py", "Inside Gemma 3", ":material/layers:",
                 "Type a prompt into Gemma 3 270M, whose norms sit on both sides of every "
                 "sublayer and on each head's queries and keys: what the norm after a sublayer "
                 "decides, the stream in three designs, QK-norm removed, 1 + γ read wrongly, "
                 "the final norm's γ, and the norms before and after a sublayer broken."),
        PageInfo("app_pages/beyond.py", "Beyond LayerNorm", ":material/trending_flat:",
                 "What recent models do instead, checked on a real one: do all-MiniLM-L6-v2's "
                 "LayerNorms bend like tanh, as Dynamic Tanh assumes? What replacing them "
                 "does, σ frozen, RMSNorm in their place, and a race of LayerNorm, RMSNorm, "
                 "DyT and no norm trained from scratch."),
        PageInfo("app_pages/placement.py", "Where the norm sits",
                 ":material/vertical_align_center:",
                 "Post-LN, pre-LN, Peri-LN and OLMo-2's reordered norm through a stack at "
                 "initialization, QK-norm holding a real attention head steady as its logits "
                 "grow, and why a weight before a norm learns at η/‖W‖² (weight decay)."),
        PageInfo("app_pages/efficientnet.py", "BatchNorm in a real network",
                 ":material/photo_camera:",
                 "Photographs through EfficientNet-Lite0's 49 BatchNorms: a batch of one in "
                 "train mode, batch-mates that change a prediction, folding for deployment, "
                 "statistics re-estimated on shifted pictures, and LayerNorm in their place."),
        PageInfo("app_pages/ln_lstm.py", "LN-LSTM vs LSTM", ":material/model_training:",
                 "Train an LSTM with and without LayerNorm on sequential digits, live, and watch "
                 "the curves and the gate activations diverge."),
        PageInfo("app_pages/performance.py", "Performance", ":material/speed:",
                 "Time the implementations of LayerNorm, BatchNorm and RMSNorm against the "
                 "memory roofline: why normalization is memory-bound."),
    ],
}


def title_of(path: str) -> str:
    """A page's title, as the navigation names it: written once, in `PAGES`."""
    return next(p.title for pages in PAGES.values() for p in pages if p.path == path)


def page_title(path: str) -> None:
    """The page's heading: its title as the navigation names it."""
    import streamlit as st  # here: the navigation imports this module before Streamlit runs

    st.title(title_of(path))


def folded(label: str, key: str, *, lazy: bool = False):  # -> streamlit's ExpanderContainer
    """One part of a long page, folded until the learner opens it: ``label`` says what is
    inside, and the part opens from the URL too (``?key=true``), so a shared link opens the same
    parts. Its content is built either way, so a control elsewhere on the page that it follows
    (and a test reading the page) finds it there; with ``lazy``, opening it reruns the page and
    the caller builds the content only while ``.open`` (a part that costs model runs)."""
    import streamlit as st  # here: the navigation imports this module before Streamlit runs

    return st.expander(label, key=key, bind="query-params", icon=":material/unfold_more:",
                       on_change="rerun" if lazy else "ignore")
