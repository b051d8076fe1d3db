"""The Kafka adapter: the one place that builds kafka-python clients (`client`), their
security settings (`security`), topic administration (`topics`) and the dead-letter
topics' format and replay (`dlq`). Every kafka-python error is translated here.
"""
