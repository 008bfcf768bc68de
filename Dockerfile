# GPU Triage bot image: multi-stage, slim, non-root. Build: docker build -t gpu-triage .
# The base is pinned by tag; pin by digest too (python:3.11.11-slim-bookworm@sha256:…) in your
# registry mirror for fully reproducible builds.
FROM python:3.11.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The whole build context (.dockerignore keeps tests, docs and local state out). The image
# installs the wheel pyproject.toml describes, with the bot's extra (Slack, the incident store,
# the HTTP server, metrics): no package folder is listed here by hand.
COPY . .
RUN pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install "$(echo /dist/*.whl)[bot]"
# Smoke test from outside the source tree, so that only what the wheel installed can be
# imported: the CLI, then every module `gpu-triage bot` imports at start (followed from its
# import statements, lazy ones included), the bundled playbook and the migration scripts.
# tests/verify/test_image.py runs the same check against the same wheel.
WORKDIR /
RUN /opt/venv/bin/gpu-triage bot --help >/dev/null \
 && /opt/venv/bin/python -m gpu_triage.selfcheck

FROM python:3.11.11-slim-bookworm
# The incident database's folder when DATABASE_URL is unset: where it always was in the image
# (the CLI's own default is the user's XDG data folder; the chart sets its volume's path).
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PORT=3000 \
    GPU_TRIAGE_DATA_DIR=/home/triage/data
RUN groupadd --system --gid 10001 triage \
 && useradd --system --uid 10001 --gid triage --home-dir /home/triage --create-home triage
COPY --from=builder /opt/venv /opt/venv
# Again on the final base: the venv must work without the builder's files.
RUN python -m gpu_triage.selfcheck
USER 10001:10001
WORKDIR /home/triage
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)"]
ENTRYPOINT ["gpu-triage"]
CMD ["bot"]
