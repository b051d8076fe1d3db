"""Operator rules behind `cdc-ctl`: retention purges, replication slots, consumer groups,
preflight checks (`doctor`, `limit_checks`) and the quarantine of unpublishable rows.
Each rule that protects data lives here, not in the CLI.
"""
