# The kmq redelivery tracker: `faust -A app worker -l info`, run from the
# service tree (app/, agents/, tables/ are not in the wheel; see DESIGN.md).
# Configured only by KMQ_* variables (docs/configuration.md); the compose
# file sets them per worker. Build: docker build -t kmq-tracker .
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A system user owns the data dir; the service tree stays root-owned (read-only to it).
RUN useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin kmq \
    && mkdir -p /var/lib/kmq \
    && chown kmq:kmq /var/lib/kmq

WORKDIR /srv/kmq

# Dependencies first (cached until pyproject.toml or the SDK changes).
COPY pyproject.toml README.md ./
COPY kmq/ kmq/
RUN pip install ".[tracker]"

COPY app/ app/
COPY agents/ agents/
COPY tables/ tables/
COPY web/ web/

# Inside a container the web view listens on every interface; compose
# publishes it on the host's loopback only.
ENV KMQ_PROFILE=production \
    KMQ_DATA_DIR=/var/lib/kmq \
    KMQ_WEB_HOST=0.0.0.0 \
    KMQ_WEB_PORT=6066

# RocksDB tables: keep them across restarts so recovery replays only the changelog tail.
VOLUME ["/var/lib/kmq"]
EXPOSE 6066

USER kmq

HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/kmq/health' % os.environ['KMQ_WEB_PORT'], timeout=4)"]

CMD ["faust", "-A", "app", "worker", "-l", "info"]
