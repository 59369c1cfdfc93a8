# One image for the API and the workers: CPU-only torch, a non-root user, dependencies in a layer
# that is rebuilt only when pyproject.toml changes.
FROM python:3.11-slim

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    NUMBA_CACHE_DIR=/tmp/numba-cache

WORKDIR /app

# the CPU build of torch (no CUDA libraries), then the other dependencies, before the code
RUN pip install torch==2.13.0 --index-url "${TORCH_INDEX_URL}"
COPY pyproject.toml README.md ./
RUN mkdir -p service worker clients \
    && touch service/__init__.py worker/__init__.py clients/__init__.py \
    && pip install . \
    && pip uninstall -y fbgp-al

COPY service ./service
COPY worker ./worker
COPY clients ./clients
RUN pip install --no-deps . && useradd --create-home --uid 10001 fbgp
USER fbgp

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["fbgp-al", "healthcheck", "api"]
CMD ["fbgp-al", "api", "--host", "0.0.0.0", "--port", "8000"]
