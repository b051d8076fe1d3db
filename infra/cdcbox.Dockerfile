# The cdcbox services (`cdc-ctl consume`, `cdc-ctl relay run`, the one-shot migrate/apply)
# and the example services of consumer/, as a non-root image. Build context: the repo root.
FROM python:3.11-slim
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin cdcbox
WORKDIR /app
COPY pyproject.toml README.md LICENSE /app/
COPY cdcbox /app/cdcbox
COPY infra /app/infra
COPY schemas /app/schemas
COPY connectors /app/connectors
RUN pip install --no-cache-dir "/app[binary,cli]"
# The example services (consumer/) are found from the working directory.
COPY consumer /app/consumer
USER cdcbox
ENTRYPOINT ["cdc-ctl"]
CMD ["--help"]
