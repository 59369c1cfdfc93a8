# One image for the API and the workers: CPU-only torch, a non-root user, dependencies in a layer
# that is rebuilt only when pyproject.toml changes, and the workers' numba kernels compiled in.
# Where Docker Hub or PyTorch's index is out of reach, both are build arguments: any Debian or
# Python image with python3 and pip (.ci/docker builds one with debootstrap), and any index that
# holds torch's CPU build and its dependencies (.ci/docker serves one from a local folder).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/var/cache/fbgp/numba

WORKDIR /app
RUN useradd --create-home --uid 10001 fbgp \
    && mkdir -p "${NUMBA_CACHE_DIR}" && chown fbgp "${NUMBA_CACHE_DIR}"

# the CPU build of torch (no CUDA libraries), then the other dependencies, before the code
RUN python3 -m pip install torch==2.13.0 --index-url "${TORCH_INDEX_URL}"
COPY pyproject.toml README.md ./
RUN python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['server']))" > /tmp/requirements.txt \
    && python3 -m pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt

COPY service ./service
COPY worker ./worker
COPY clients ./clients
RUN python3 -m pip install --no-deps '.[server]' && rm -rf build ./*.egg-info

USER fbgp
# A worker compiles its NUTS kernels (numba, cache=True) before it serves: 5 s to a minute on one
# core, as busy as the host is. Compile them now, as the runtime user, from the installed package
# (numba's cache is keyed on the source file's path and time stamp, and on the CPU: a host of
# another CPU model compiles them again at start, as before).
# Run from / so that the installed package, not /app's copy, is imported, as `fbgp-al` does.
RUN cd / && OMP_NUM_THREADS=1 python3 -c "from fbgp_al.worker.mcmc import sample_posterior; \
sample_posterior([[0.5]], [0.0], chains=1, warmup=2, samples=2)" \
    && test -n "$(ls -A "${NUMBA_CACHE_DIR}")"

EXPOSE 8000
# `healthcheck` with no role: healthy when the API answers here or a worker of this container
# has a fresh heartbeat in Redis, so `docker run ... fbgp-al fbgp-al worker` is checked right too.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["fbgp-al", "healthcheck"]
CMD ["fbgp-al", "api", "--host", "0.0.0.0", "--port", "8000"]
