"""How much one learner may ask of the server: full limits on a laptop, tighter ones in demo mode.

Set the environment variable ``LNVIZ_DEMO=1`` when the app is hosted for a class (a shared link,
Streamlit Community Cloud, a Docker container): uploads, tensors and training runs are then
capped so that many learners at once fit in about a gigabyte of memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DEMO_LIMITS", "FULL_LIMITS", "Limits", "current_limits"]


@dataclass(frozen=True)
class Limits:
    upload_mb: int  # largest uploaded file
    max_elements: int  # largest tensor, uploaded or generated
    max_training_steps: int  # longest training run on the LN-LSTM page
    #: the most multiply-adds of one training run (see lnviz.train.training_work): full, the
    #: largest run the page offers on MNIST (about an hour on two cores); demo, about a minute
    max_training_work: float


FULL_LIMITS = Limits(upload_mb=200, max_elements=50_000_000, max_training_steps=5_000,
                     max_training_work=1e14)
DEMO_LIMITS = Limits(upload_mb=20, max_elements=2_000_000, max_training_steps=500,
                     max_training_work=1e12)


def current_limits() -> Limits:
    """:data:`DEMO_LIMITS` when ``LNVIZ_DEMO`` is set to 1/true/yes, else :data:`FULL_LIMITS`."""
    demo = os.environ.get("LNVIZ_DEMO", "").strip().lower() in ("1", "true", "yes")
    return DEMO_LIMITS if demo else FULL_LIMITS
