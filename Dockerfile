# genbot: one bot process on SQLite (docs/deployment.md). Build: docker build -t genbot .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml requirements.lock README.md LICENSE ./
# The runtime dependencies at the versions CI passed with (requirements.lock, made by uv from
# pyproject.toml; no dev extras), all from wheels (no compiler in the image), then the project
# itself without resolving anything again.
RUN pip install --no-cache-dir --prefix=/install --only-binary :all: -r requirements.lock
COPY bot ./bot
COPY cogs ./cogs
RUN pip install --no-cache-dir --prefix=/install --no-deps .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DATABASE_PATH=/data/bot.db \
    METRICS_HOST=0.0.0.0 \
    METRICS_PORT=9100
COPY --from=build /install /usr/local
# A non-root user that owns only the data volume.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin genbot \
    && mkdir -p /data \
    && chown genbot:genbot /data
USER genbot
WORKDIR /data
# The SQLite database, its -wal and -shm files, and the sandbox state live here.
VOLUME ["/data"]
EXPOSE 9100
# The bot finishes running commands for up to 20 s on SIGTERM; give it longer before SIGKILL
# (docker stop -t 30, or stop_grace_period in docker-compose.yml).
STOPSIGNAL SIGTERM
# Healthy only when /readyz answers 200: gateway ready, database answering, poller running.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('METRICS_PORT') or '9100'; sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=4).status == 200 else 1)"]
CMD ["python", "-m", "bot"]
