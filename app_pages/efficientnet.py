"""BatchNorm in a real network: EfficientNet-Lite0's 49 BatchNorms, on photographs and on a
picture of your own."""

import streamlit as st

from lnviz import charts
from lnviz.data.photos import PHOTOS, PhotoFileError
from lnviz.lessons.efficientnet import (
    ALONE_OPTIONS,
    BATCH_SIZES,
    BLOCK_RUNS,
    CROPS,
    DRAWS,
    FOLD_OPTIONS,
    GAP_BATCH,
    GAP_OPTIONS,
    IMAGE_RUNS,
    MATES_OPTIONS,
    REESTIMATE_OPTIONS,
    SHIFTS,
    SWAP_OPTIONS,
    SWAPS,
    TIMED,
    TIMED_BATCH,
    alone,
    alone_answer,
    batch_mates,
    credits,
    fold,
    fold_answer,
    gaps_answer,
    layer_gaps,
    mates_answer,
    photo_pool,
    prepared_photo,
    prepared_upload,
    shifted,
    shifted_answer,
    shown_picture,
    source_of,
    swap_answer,
    swap_table,
    swapped,
)
from lnviz.limits import IMAGE_MAX_BYTES, current_limits
from lnviz.models import ModelFileError, efficientnet_lite0
from lnviz.models.efficientnet import CROP_FRACTION
from lnviz.ui import jobs
from lnviz.ui.cache import Named, cached, shared
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.pages import folded, page_title
from lnviz.ui.source import uploaded_files
from lnviz.ui.state import prediction

OWN = "a picture of your own (PNG or JPEG)"

page_title("app_pages/efficientnet.py")
with refusal(icon=":material/block:", errors=(ValueError, ModelFileError, PhotoFileError)):
    model = shared(efficientnet_lite0)
    pool = shared(photo_pool)
st.caption(f"EfficientNet-Lite0, an image classifier trained on ImageNet's 1,000 classes "
           f"({model.parameters / 1e6:.2f} M parameters, 49 BatchNorms), runs on this server "
           "from its published weights (Apache-2.0): every number below is that network's, "
           "computed now.")
st.markdown(
    "BatchNorm vs LayerNorm showed the rule on a small batch: in **train mode** a BatchNorm "
    "normalizes each channel with the mean and variance of the batch in front of it, over "
    "every picture and every position; in **eval mode** it uses running statistics it kept "
    "during training. Here are the 49 BatchNorms of a real network, one after each "
    "convolution, written out in plain PyTorch (`lnviz.models.efficientnet_lite0()`) and "
    "checked in the tests against the reference implementation on the same weights. Pick a "
    f"picture; the network sees a central square of it, {CROP_FRACTION:.1%} of the shorter "
    "side, resized to 224 × 224, pixels mapped by (x − 127)/128, as the weights expect.")

choice = st.selectbox(
    "Picture", [p.name for p in PHOTOS] + [OWN], key="en_photo", bind="query-params",
    help="Seven photographs that scikit-learn and scikit-image ship (credits at the foot of "
         "the page), or one of yours, run on this server and kept for your session only.")
if choice == OWN:
    max_pixels = current_limits().image_pixels
    files = uploaded_files(
        "Your picture", key="en_upload", name="en_upload", type=["png", "jpg", "jpeg"],
        help=f"A PNG or JPEG of up to {IMAGE_MAX_BYTES // 2**20} MB and "
             f"{max_pixels // 1_000_000} million pixels; turned upright as its EXIF "
             "says. Only this session sees it.")
    if not files:
        st.info("Upload a picture to run it through the network.",
                icon=":material/add_photo_alternate:")
        st.stop()
    _, file_id, data = files[0]
    name = ("en_upload", file_id)
    with refusal(icon=":material/block:"):
        image, crops = cached(prepared_upload, Named(data, name), max_bytes=IMAGE_MAX_BYTES,
                              max_pixels=max_pixels)
else:
    name = ("en_photo", choice)
    with refusal(icon=":material/block:", errors=(ValueError, PhotoFileError)):
        image, crops = cached(prepared_photo, choice)
everyones = name[0] == "en_photo"  # the app's own photos: for_all (lnviz.ui.cache)
# an upload of one of the page's photos draws its batch-mates from the others, as the photo does
source = cached(source_of, Named(pool, "pool"), Named(image, name))

# part 1 (about half a second) is the page's first view: it runs at once, as a page's rerun
# does; the server's line (lnviz.ui.jobs) is for the parts that hold a core for seconds
with st.spinner("Running the network…"):
    single = cached(alone, Named(model, "efficientnet"), Named(image, name),
                    Named(pool, "pool"), for_all=everyones)
cols = st.columns([1, 2])
cols[0].image(cached(shown_picture, Named(image, name)), width=224,
              caption="What the network sees: 224 × 224.")
cols[1].markdown("In eval mode it says: " + ", ".join(
    f"**{label}** ({p:.1%})" for label, p in single.eval_top[:3]) + ".")

# --- 1. A batch of one ------------------------------------------------------------------------
st.subheader("1 · Train mode, alone in its batch")
st.markdown(
    "A forgotten `model.eval()` leaves every BatchNorm in train mode. Fed this one picture, "
    "each BatchNorm then takes its mean and variance from this picture alone.")
guess = prediction(
    f"in train mode, with this picture alone in its batch, what happens to “{single.label}”?",
    ALONE_OPTIONS, key="en_alone_guess", what="both modes' top five", context=name,
    help="Eval mode uses the running statistics; train mode, the batch's own.")
if guess is not None:
    st.markdown(alone_answer(single).reply(guess))
    show_figure(charts.efficientnet.alone_figure, single.eval_top, single.train_top,
                key="en_alone")

# --- 2. Batch-mates ---------------------------------------------------------------------------
part = folded("2 · Batch-mates in train mode", "en_part2", lazy=True)
if part.open:
    with part:
        st.markdown(
            f"Now the picture shares its batch, still in train mode, with pictures drawn from "
            f"the page's other photos and their crops ({DRAWS} draws of mates; batches of "
            f"{', '.join(str(s) for s in BATCH_SIZES[:-1])} and {BATCH_SIZES[-1]}"
            + (", the last with all the other photos' pictures as mates: one batch, whatever "
               "the draw" if len(pool.others(source)) + 1 == BATCH_SIZES[-1] else "") + ").")
        back = prediction(
            f"from what batch size does train mode put “{single.label}” first, as eval mode "
            "does?", MATES_OPTIONS, key="en_mates_guess",
            what="the probability against the batch size", context=name,
            help="In most of the draws of batch-mates.")
        if back is not None and guess is None:  # its answer tells part 1's
            st.caption("Answer part 1's question first: this part's answer tells it.")
        elif back is not None:
            with st.spinner("Running the batches…"):
                mates = jobs.heavy_cached(
                    "the batches of part 2", IMAGE_RUNS,
                    DRAWS * (sum(BATCH_SIZES) + 1 + CROPS) + 1 + CROPS, batch_mates,
                    Named(model, "efficientnet"), Named(image, name), Named(crops, name),
                    Named(pool, "pool"), source, for_all=everyones)
            st.markdown(mates_answer(mates, single.label).reply(back))
            show_figure(charts.efficientnet.mates_figure, mates.sizes, mates.p, mates.eval_p,
                        key="en_mates")

# --- 3. Batch statistics against the running ones ---------------------------------------------
part = folded("3 · The batch's statistics against the running ones", "en_part3", lazy=True)
if part.open:
    with part:
        st.markdown(
            f"A batch of {GAP_BATCH} of the page's pictures (each photo and one crop of it; "
            "the same for every picture you pick). One BatchNorm at a time uses the batch's "
            "mean and variance, the other 48 their running ones; how far do the predictions "
            "move?")
        where = prediction(
            "where does the BatchNorm sit that, alone in train mode, moves the predictions "
            "most?", GAP_OPTIONS, key="en_gap_guess", what="every BatchNorm's cost",
            help="Cost: the KL divergence of each picture's predicted distribution from its "
                 "eval-mode one, averaged over the batch. The 49 in forward order, in thirds.")
        if where is not None:
            with st.spinner("Running the batch 49 times…"):
                gaps = jobs.heavy_cached("the 49 runs of part 3", BLOCK_RUNS, 50 * GAP_BATCH,
                                         layer_gaps, Named(model, "efficientnet"),
                                         Named(pool, "pool"), for_all=True)
            st.markdown(gaps_answer(gaps).reply(where))
            show_figure(charts.efficientnet.gaps_figure, gaps.names, gaps.cost, gaps.gap,
                        key="en_gaps")

# --- 4. Folding -------------------------------------------------------------------------------
part = folded("4 · Folding each BatchNorm into its convolution", "en_part4", lazy=True)
if part.open:
    with part:
        st.markdown(
            "For deployment, a BatchNorm in eval mode is usually folded into the convolution "
            "before it: new weights and a bias, and no BatchNorm left. The page folds all 49 "
            f"and runs its {len(pool.labels)} pictures through both networks.")
        moved = prediction(
            "folded, how far do the logits move?", FOLD_OPTIONS, key="en_fold_guess",
            what="the two networks side by side", help="The largest change of any logit of "
                                                       "any picture.")
        if moved is not None:
            with st.spinner("Folding and timing…"):
                folding = jobs.heavy_cached("folding and timing", IMAGE_RUNS,
                                            2 * len(pool.labels)
                                            + 2 * (TIMED + 1) * TIMED_BATCH, fold,
                                            Named(model, "efficientnet"), Named(pool, "pool"))
            st.markdown(fold_answer(folding).reply(moved))

# --- 5. Shifted pictures ----------------------------------------------------------------------
part = folded("5 · Shifted pictures, and the statistics re-estimated", "en_part5", lazy=True)
if part.open:
    with part:
        st.markdown(
            f"The page's {len(pool.labels)} pictures, all shifted the same way. The running "
            "statistics were kept on ImageNet's photographs; re-estimating them on the "
            "shifted pictures (each BatchNorm's mean and variance on them, in train mode) is "
            "a known remedy. What counts: how many pictures keep the top class they have "
            "before the shift.")
        how = st.radio("Shift", list(SHIFTS), key="en_shift", bind="query-params",
                       horizontal=True, help="Applied to the pixels (0–255) of the 224 × 224 "
                                             "pictures, then clipped to 0–255.")
        better = prediction(
            "which brings back more of the pictures' classes?", REESTIMATE_OPTIONS,
            key="en_shift_guess", what="the counts", context=how,
            help="Re-estimated on the shifted pictures themselves.")
        if better is not None:
            with st.spinner("Running the shifted pictures…"):
                shift_result = jobs.heavy_cached(
                    "the shifted pictures", IMAGE_RUNS, 6 * len(pool.labels), shifted,
                    Named(model, "efficientnet"), Named(pool, "pool"), how,
                    for_all=True)
            st.markdown(shifted_answer(shift_result).reply(better))

# --- 6. A per-sample norm in BatchNorm's place ------------------------------------------------
part = folded("6 · LayerNorm in BatchNorm's place", "en_part6", lazy=True)
if part.open:
    with part:
        first = next(iter(SWAPS))
        st.markdown(
            "LayerNorm and GroupNorm do not care about the batch: could the trained network "
            f"just switch? Each of the 49 BatchNorms is replaced by {first}, keeping its γ, β "
            f"and ε, and the page's {len(pool.labels)} pictures are run again.")
        survive = prediction(
            f"how many of the {len(pool.labels)} pictures keep their top class?",
            SWAP_OPTIONS, key="en_swap_guess", what="the three per-sample norms",
            help="Their top class in eval mode with the BatchNorms.")
        if survive is not None:
            with st.spinner("Running the network with per-sample norms…"):
                swap = jobs.heavy_cached("the per-sample norms", IMAGE_RUNS,
                                         4 * len(pool.labels), swapped,
                                         Named(model, "efficientnet"), Named(pool, "pool"),
                                         for_all=True)
            st.markdown(swap_answer(swap).reply(survive))
            st.dataframe(swap_table(swap), hide_index=True, key="en_swap_table",
                         column_config={"median top probability":
                                        st.column_config.NumberColumn(format="%.3f")})
            show_figure(charts.efficientnet.spread_figure, swap.names, swap.spread,
                        key="en_spread")

st.caption(f"Photographs: {credits()}.")
