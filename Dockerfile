# bertkit serve on CPU. Build:  docker build -t bertkit-serve .
# Run:   docker run -p 8000:8000 -v "$PWD/model:/model:ro" -e BERTKIT_API_KEY=change-me bertkit-serve
# See docs/deploy.md for the flags, TLS, rate limits, metrics and Kubernetes probes.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# torch first, the CPU build: a bare requirement would pull the CUDA wheels (gigabytes the image never uses).
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install '.[train,serve,metrics]' && rm -rf /app/src

# A user without privileges; the model is mounted read-only at /model.
RUN useradd --create-home --uid 10001 bertkit
USER bertkit

EXPOSE 8000
# Readiness: 200 once the model is loaded, 503 while draining after SIGTERM.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health/ready', timeout=2).status == 200 else 1)"

# SIGTERM (docker stop, Kubernetes) drains the requests in flight for up to --graceful-timeout seconds, then exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["bertkit", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["--model", "/model"]
