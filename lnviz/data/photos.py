"""Photographs that installed packages ship, read as files: scikit-learn's two sample images and
five of scikit-image's. The packages are found with :func:`importlib.util.find_spec` and never
imported (scikit-image is installed without its dependencies, for these files alone); each file
is decoded by :func:`lnviz.data.files.load_image`, as an upload would be.

Each photo's credit and licence, as the packages' own notes give them, is in :data:`PHOTOS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lnviz.data.files import installed_folder, load_image

__all__ = ["PHOTOS", "Photo", "PhotoFileError", "photo", "photos"]


class PhotoFileError(RuntimeError):
    """A photograph's package is not installed, or its file cannot be read."""


@dataclass(frozen=True)
class Photo:
    name: str  # what the page calls it
    module: str  # the package's import name
    package: str  # its PyPI name
    path: str  # the file inside the package
    credit: str


PHOTOS = (
    Photo("a temple in China", "sklearn", "scikit-learn", "datasets/images/china.jpg",
          "danielbuechele on Flickr, CC BY 2.0 (scikit-learn's sample images)"),
    Photo("a flower", "sklearn", "scikit-learn", "datasets/images/flower.jpg",
          "vultilion on Flickr, CC BY 2.0 (scikit-learn's sample images)"),
    Photo("a cat", "skimage", "scikit-image", "data/chelsea.png",
          "Stefan van der Walt, CC0 (scikit-image's data)"),
    Photo("a cup of coffee", "skimage", "scikit-image", "data/coffee.png",
          "Rachel Michetti, CC0, courtesy of Pikolo Espresso Bar (scikit-image's data)"),
    Photo("a rocket launch", "skimage", "scikit-image", "data/rocket.jpg",
          "SpaceX, public domain (scikit-image's data)"),
    Photo("an astronaut", "skimage", "scikit-image", "data/astronaut.png",
          "NASA, public domain: Eileen Collins (scikit-image's data)"),
    Photo("a cameraman (greyscale)", "skimage", "scikit-image", "data/camera.png",
          "Lav Varshney, CC0 (scikit-image's data)"),
)


def _file(entry: Photo) -> Path:
    folder = installed_folder(entry.module)
    if folder is None:
        raise PhotoFileError(f"{entry.name!r} comes with {entry.package}, which is not "
                             f"installed: pip install --no-deps {entry.package}")
    return folder / entry.path


def photo(name: str) -> np.ndarray:
    """The photo called ``name`` (:data:`PHOTOS`) as an (H, W, 3) uint8 array."""
    entry = next((p for p in PHOTOS if p.name == name), None)
    if entry is None:
        raise KeyError(f"no photo called {name!r}; they are {[p.name for p in PHOTOS]}")
    path = _file(entry)
    if not path.is_file():
        raise PhotoFileError(f"{path} is missing: pip install --no-deps --force-reinstall "
                             f"{entry.package}")
    return load_image(path)


def photos() -> dict[str, np.ndarray]:
    """Every photo of :data:`PHOTOS`, by name."""
    return {p.name: photo(p.name) for p in PHOTOS}
