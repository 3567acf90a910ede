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


PAGES: dict[str, list[PageInfo]] = {
    "Explore": [
        PageInfo("pages/home.py", "Home", ":material/home:",
                 "What normalization layers do, in one formula.", default=True),
        PageInfo("pages/explorer.py", "Explorer", ":material/biotech:",
                 "Put any batch through any normalization and watch every number: which cells "
                 "share a mean and variance, before and after, step by step."),
    ],
}
