# stacklens server image: collector + API + dashboard (`stacklens up`) against an external
# PostgreSQL given by STACKLENS_DATABASE_URL. The hook library is built too, so the image
# can also serve as a build stage for clusters that copy libstacklens.so out of it.
FROM debian:12-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        build-essential python3 python3-venv python3-dev openmpi-bin libopenmpi-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/stacklens
COPY . .
# Editable install: the collector loads its compiled codec from collector/build.
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install -q -e . \
    && make -C mpi_pmpi_hooks && make -C collector/csrc
ENV PATH=/opt/venv/bin:$PATH \
    STACKLENS_HTTP_HOST=0.0.0.0 \
    STACKLENS_COLLECTOR=0.0.0.0:7451 \
    STACKLENS_STATE_DIR=/var/lib/stacklens
EXPOSE 7450 7451
CMD ["stacklens", "up"]
