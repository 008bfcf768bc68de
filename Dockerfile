# GPU Triage bot image: multi-stage, slim, non-root. Build: docker build -t gpu-triage .
# The base is pinned by tag; pin by digest too (python:3.11.11-slim-bookworm@sha256:…) in your
# registry mirror for fully reproducible builds.
FROM python:3.11.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md ./
COPY triage ./triage
COPY kube ./kube
COPY incidents ./incidents
COPY bot ./bot
COPY gpu_triage ./gpu_triage
COPY playbooks ./playbooks
COPY migrations ./migrations
RUN pip install . && gpu-triage --help >/dev/null

FROM python:3.11.11-slim-bookworm
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PORT=3000
RUN groupadd --system --gid 10001 triage \
 && useradd --system --uid 10001 --gid triage --home-dir /home/triage --create-home triage
COPY --from=builder /opt/venv /opt/venv
USER 10001:10001
WORKDIR /home/triage
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)"]
ENTRYPOINT ["gpu-triage"]
CMD ["bot"]
