# stacklens server image: collector + API + dashboard (`stacklens up`) against an external
# PostgreSQL given by STACKLENS_DATABASE_URL. The hook library is built too, so the image
# can also serve as a build stage for clusters that copy libstacklens.so out of it.
# MUNGE is installed: the collector proves senders with it (the default ingest mode,
# `proven`, docs/identity.md) through libmunge and a munged's socket, and the same image
# runs that munged (docker-compose.yml, service `munge`: scripts/docker-munged.sh).
FROM debian:12-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        build-essential python3 python3-venv python3-dev openmpi-bin libopenmpi-dev \
        munge libmunge2 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/stacklens
COPY . .
# Editable install: the collector loads its compiled codec from collector/build.
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install -q -e . \
    && make -C mpi_pmpi_hooks && make -C collector/csrc
# Senders are proven (MUNGE over TCP; the collector's own Unix socket is of no use to
# hooks outside the container: off); the munged socket is the one docker-compose.yml
# shares from its `munge` service (libmunge's default path).
ENV PATH=/opt/venv/bin:$PATH \
    STACKLENS_HTTP_HOST=0.0.0.0 \
    STACKLENS_COLLECTOR=0.0.0.0:7451 \
    STACKLENS_STATE_DIR=/var/lib/stacklens \
    STACKLENS_INGEST_AUTH=proven \
    STACKLENS_COLLECTOR_SOCKET=off \
    STACKLENS_MUNGE_SOCKET=/run/munge/munge.socket.2
EXPOSE 7450 7451
CMD ["stacklens", "up"]
