"""Operations: logging and its redaction, Prometheus metrics, the health server."""
