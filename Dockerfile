# hubsync from this repository: one image for the relay, the hub consumers (with
# the PostgreSQL driver, for a postgresql:// hub store) and the RQ effects
# worker (docker-compose.yml picks the command).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY hubsync ./hubsync
COPY producers ./producers
COPY consumers ./consumers
COPY hubstore ./hubstore
# at the pins the tests ran with (constraints.txt), as scripts/test.sh installs them
RUN pip install -c constraints.txt ".[postgres]" \
    && useradd --system --uid 10001 --home-dir /var/lib/hubsync --create-home hubsync \
    && mkdir -p /state /hub \
    && chown hubsync:hubsync /state /hub

# Named volumes mounted on /state and /hub start with this ownership.
USER hubsync
WORKDIR /var/lib/hubsync
EXPOSE 9101 9102
CMD ["hubsync", "--help"]
