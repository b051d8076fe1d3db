"""Kafka authorization derived from what cdcbox knows: one principal per role (Connect's
worker, each producing service's relay, each consuming service, the supervisor, the
operator), the grants each role needs (`plan`), and making a cluster hold exactly those
(`cluster`)."""
