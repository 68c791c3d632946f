# The kmq redelivery tracker: `faust -A app worker -l info`, run from the
# service tree (app/, agents/, tables/ are not in the wheel; see DESIGN.md).
# Configured only by KMQ_* variables (docs/configuration.md); the compose
# file sets them per worker. Build: docker build -t kmq-tracker .

# The base image by tag (its security fixes arrive with each rebuild); for builds that
# must be reproducible, pin a digest:
#   docker build --build-arg BASE_IMAGE=python:3.11-slim@sha256:<digest> -t kmq-tracker .
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# tini as PID 1: it forwards SIGTERM to faust (so a worker leaves its group before the
# grace period ends) and reaps children. A system user owns the data dir; the service
# tree stays root-owned (read-only to it).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin kmq \
    && mkdir -p /var/lib/kmq \
    && chown kmq:kmq /var/lib/kmq

WORKDIR /srv/kmq

# Dependencies first, pinned (constraints.txt): this layer is cached until a pin
# changes, whatever happens to the SDK or the service tree.
COPY constraints.txt ./
RUN pip install -r constraints.txt

# The SDK itself, without resolving again; pip check fails the build if a pin
# no longer satisfies pyproject.toml.
COPY pyproject.toml README.md ./
COPY kmq/ kmq/
RUN pip install --no-deps ".[tracker]" && pip check

COPY app/ app/
COPY agents/ agents/
COPY tables/ tables/
COPY web/ web/

# Inside a container the web view listens on every interface, which the worker
# allows only with KMQ_AUTH=on (and KMQ_ADMIN_TOKEN): with auth off it refuses to
# start until KMQ_WEB_HOST names one address (compose sets each worker's hostname).
ENV KMQ_PROFILE=production \
    KMQ_DATA_DIR=/var/lib/kmq \
    KMQ_WEB_HOST=0.0.0.0 \
    KMQ_WEB_PORT=6066

# RocksDB tables: keep them across restarts so recovery replays only the changelog tail.
VOLUME ["/var/lib/kmq"]
EXPOSE 6066

USER kmq

# Ready, not just alive: /kmq/ready answers 200 once this worker serves its partitions.
# It asks KMQ_WEB_HOST (loopback when that is a wildcard address), so a worker bound to
# one interface is checked there.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; h = os.environ.get('KMQ_WEB_HOST', '127.0.0.1'); h = '127.0.0.1' if h in ('', '0.0.0.0') else ('::1' if h == '::' else h); h = '[%s]' % h if ':' in h else h; urllib.request.urlopen('http://%s:%s/kmq/ready' % (h, os.environ['KMQ_WEB_PORT']), timeout=4)"]

ENTRYPOINT ["/usr/bin/tini", "-g", "--"]
CMD ["faust", "-A", "app", "worker", "-l", "info"]
