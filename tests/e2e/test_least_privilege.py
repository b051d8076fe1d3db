"""Least privilege on a real secured stack (its brokers run KRaft's StandardAuthorizer):
each service on its own principal, granted by `cdcbox.acls` what its role needs and
nothing else. Proven by denial, each refusal beside the same call made by a principal
that holds the grant, and by a consumer service applying an event Connect published
(exactly-once on) on its own principal."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kafka
import psycopg
import pytest

from cdcbox import wire
from cdcbox.acls import cluster
from cdcbox.acls.checks import acl_checks
from cdcbox.acls.grants import Grant, user
from cdcbox.acls.plan import ConsumerRole, Fleet, RelayRole, plan
from cdcbox.consumer import Consumer, ConsumerConfig, Event, Handler, Outcome
from cdcbox.errors import CdcboxError, KafkaRequestError
from cdcbox.kafka.acls import AclAdmin
from cdcbox.kafka.client import Admin, KafkaSettings, Producer, TopicPartition
from cdcbox.kafka.client import Consumer as KafkaConsumer
from cdcbox.kafka.security import KafkaSecurity, Secret
from cdcbox.kafka.transactions import TransactionAdmin
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.grants import STACK_FLEET, admin_settings, grant_roles
from cdcbox.stack.tls import MECHANISM, StackTls
from cdcbox.testing import read_topic
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Roles:
    """Two consuming services and a producing service's relay, each its own principal."""

    fleet: Fleet
    shop_topic: str  # the relay's, read by billing
    user_topic: str  # read by mail only
    login: Callable[[str], KafkaSettings]  # a principal's settings
    operator: KafkaSettings
    admin: KafkaSettings
    billing: ConsumerRole
    mail: ConsumerRole
    relay: RelayRole


@pytest.fixture(scope="module")
def roles(secured: tuple[StackConfig, Endpoints]) -> Roles:
    config, _ = secured
    tls = StackTls.of(config.state_dir)
    shop_topic, user_topic = wire.topic_for(unique("cart")), wire.topic_for(unique("user"))
    billing = ConsumerRole(unique("billing"), (shop_topic,))
    mail = ConsumerRole(unique("mail"), (user_topic,))
    relay = RelayRole(unique("shop"), (shop_topic,))
    fleet = Fleet(connect=STACK_FLEET.connect, relays=(relay,), consumers=(billing, mail))
    admin = admin_settings(config)
    cluster.apply(admin, plan(fleet))
    password = secrets.token_urlsafe(24)
    with AclAdmin(admin) as acl_admin:
        for role in (billing, mail, relay):
            acl_admin.upsert_scram_user(role.user, password, MECHANISM)
        acl_admin.create_topics([shop_topic, user_topic])

    def login(name: str) -> KafkaSettings:
        security = KafkaSecurity(
            protocol="SASL_SSL",
            sasl_mechanism=MECHANISM,
            username=name,
            password=Secret(password),
            ca_file=tls.ca,
        )
        return KafkaSettings(config.bootstrap_servers, request_timeout_ms=5000, security=security)

    for role in (billing, mail, relay):  # SCRAM users reach every listener's cache soon
        eventually(
            lambda r=role: _logs_in(login(r.user)),  # type: ignore[misc]
            timeout=30,
            what=f"{role.user} logging in",
        )
    return Roles(
        fleet,
        shop_topic,
        user_topic,
        login,
        KafkaSettings(config.bootstrap_servers, security=tls.client("operator")),
        admin,
        billing,
        mail,
        relay,
    )


def _logs_in(settings: KafkaSettings) -> bool:
    try:
        with Admin(settings, bootstrap_timeout_ms=3000) as admin:
            admin.list_topics()
        return True
    except CdcboxError:
        return False


def _partitions(consumer: KafkaConsumer, topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]


def _end(settings: KafkaSettings, topic: str) -> int:
    """The records of `topic`, all partitions."""
    consumer = KafkaConsumer(settings, group_id=None)
    try:
        return sum(consumer.end_offsets(_partitions(consumer, topic)).values())
    finally:
        consumer.close()


def _send(settings: KafkaSettings, topic: str) -> None:
    producer = Producer(settings)
    try:
        producer.send(topic, key=b"k", value=b"{}", headers=[]).get(timeout=30)
    finally:
        producer.close()


def _polled(settings: KafkaSettings, partitions: list[TopicPartition], polls: int = 5) -> int:
    """How many records `settings`' principal reads from `partitions`' beginning."""
    consumer = KafkaConsumer(settings, group_id=None, auto_offset_reset="earliest")
    try:
        consumer.assign(partitions)
        return sum(len(r) for _ in range(polls) for r in consumer.poll(1000).values())
    finally:
        consumer.close()


def _refused(kind: str, call: Callable[[], Any]) -> None:
    with pytest.raises(KafkaRequestError) as refused:
        call()
    assert refused.value.kind == kind


def test_a_consumer_services_principal_cannot_produce_to_an_outbox_topic(roles: Roles) -> None:
    before = _end(roles.operator, roles.shop_topic)
    billing = roles.login(roles.billing.user)
    _refused("TopicAuthorizationFailedError", lambda: _send(billing, roles.shop_topic))
    assert _end(roles.operator, roles.shop_topic) == before  # nothing appended
    _send(roles.login(roles.relay.user), roles.shop_topic)  # its producer may
    assert _end(roles.operator, roles.shop_topic) == before + 1


def test_a_relay_cannot_write_a_topic_it_does_not_own(roles: Roles) -> None:
    before = _end(roles.operator, roles.user_topic)
    relay = roles.login(roles.relay.user)
    _refused("TopicAuthorizationFailedError", lambda: _send(relay, roles.user_topic))
    assert _end(roles.operator, roles.user_topic) == before


def test_a_consumer_cannot_write_another_services_dead_letters(roles: Roles) -> None:
    billing = roles.login(roles.billing.user)
    theirs, mine = roles.user_topic + wire.DLQ_SUFFIX, roles.shop_topic + wire.DLQ_SUFFIX
    with Admin(roles.operator) as admin:
        admin.create_topics([theirs, mine])
    _refused("TopicAuthorizationFailedError", lambda: _send(billing, theirs))
    _send(billing, mine)


def test_a_consumer_cannot_read_another_services_topic(roles: Roles) -> None:
    """kafka-python answers an unauthorized fetch with no records (and hides the topic
    from its metadata), where the operator reads the record that is there."""
    _send(roles.operator, roles.user_topic)
    billing = roles.login(roles.billing.user)
    with Admin(billing) as admin:
        assert roles.user_topic not in admin.list_topics()
        assert roles.shop_topic in admin.list_topics()
    with KafkaConsumer(roles.operator, group_id=None) as seeing:  # billing is shown none
        partitions = _partitions(seeing, roles.user_topic)
    assert _polled(billing, partitions) == 0
    assert len(read_topic(roles.operator, roles.user_topic)) >= 1


def test_a_consumer_cannot_join_or_reset_another_services_group(roles: Roles) -> None:
    billing = roles.login(roles.billing.user)
    consumer = KafkaConsumer(billing, group_id=roles.mail.group_id)
    try:
        consumer.subscribe([roles.shop_topic])
        _refused("GroupAuthorizationFailedError", lambda: [consumer.poll(1000) for _ in range(10)])
    finally:
        consumer.close()
    partition = TopicPartition(roles.user_topic, 0)
    with Admin(billing) as admin:
        _refused(
            "GroupAuthorizationFailedError",
            lambda: admin.alter_group_offsets(roles.mail.group_id, {partition: 0}),
        )


def test_acls_apply_is_idempotent_and_keeps_a_grant_it_did_not_make(roles: Roles) -> None:
    by_hand = Grant(user(roles.mail.user), "TOPIC", roles.shop_topic, "DESCRIBE")
    with AclAdmin(roles.admin) as admin:
        admin.create([cluster.row_of(by_hand)])
    planned = plan(roles.fleet)
    found = cluster.apply(roles.admin, planned)
    assert found.missing == [] and found.removable == []
    assert by_hand in found.foreign
    with AclAdmin(roles.admin) as admin:
        assert cluster.row_of(by_hand) in admin.list_allowed()  # kept
        (ledger,) = admin.topic_configs([cluster.LEDGER]).values()
    assert ledger["cleanup.policy"] == "compact"


def test_a_consumer_service_applies_connects_event_on_its_own_principal(
    secured: tuple[StackConfig, Endpoints], roles: Roles
) -> None:
    """Connect (its principal, exactly-once on) publishes; the consuming service, granted
    only its role, applies the event and commits its offset in its own group."""
    _, endpoints = secured
    aggregate_type = roles.billing.topics[0].removeprefix(wire.TOPIC_PREFIX)
    with psycopg.connect(endpoints.dsn, passfile=endpoints.pgpassfile) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS least_privilege_effect (event_id uuid)")
        with conn.transaction():
            event_id = Outbox().append(conn, NewEvent(aggregate_type, "a1", "Billed", {}))

    class Bills(Handler):
        consumer_name = roles.billing.service
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Billed"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            conn.execute("INSERT INTO least_privilege_effect VALUES (%s)", (event.event_id,))

    consumer = Consumer(
        [Bills()],
        ConsumerConfig(
            bootstrap_servers=roles.operator.bootstrap_servers,
            dsn=f"{endpoints.dsn}&passfile={endpoints.pgpassfile}",
            group_id=roles.billing.group_id,
            kafka_security=roles.login(roles.billing.user).security,
            auto_offset_reset="earliest",
        ),
    )
    stats = consumer.run(max_records=10, idle_timeout_s=30)
    assert stats[Outcome.PROCESSED] == 1
    with psycopg.connect(endpoints.dsn, passfile=endpoints.pgpassfile) as conn:
        applied = conn.execute(
            "SELECT count(*) FROM least_privilege_effect WHERE event_id = %s", (event_id,)
        )
        assert applied.fetchone() == (1,)


def test_doctor_reports_a_principal_lacking_a_grant_and_one_holding_more(roles: Roles) -> None:
    planned = plan(roles.fleet)
    lacking = next(
        g for g in planned if g.principal == user(roles.mail.user) and g.resource == "GROUP"
    )
    extra = Grant(user(roles.relay.user), "TOPIC", roles.user_topic, "READ")
    with AclAdmin(roles.admin) as admin:
        admin.delete([cluster.row_of(lacking)])
        admin.create([cluster.row_of(extra)])
    try:
        lines = {(c.name, c.detail) for c in acl_checks(roles.operator, planned) if not c.ok}
        assert (f"kafka ACLs: {lacking.principal} lacks", lacking.what) in lines
        assert (f"kafka ACLs: {extra.principal} holds more", extra.what) in lines
    finally:
        with AclAdmin(roles.admin) as admin:
            admin.delete([cluster.row_of(extra)])
        cluster.apply(roles.admin, planned)
    assert not any("lacks" in c.name for c in acl_checks(roles.operator, planned))


def test_only_the_supervisor_may_abort_a_transaction_left_open(
    secured: tuple[StackConfig, Endpoints], roles: Roles
) -> None:
    """A transaction Connect's principal opened on an outbox topic and left open: the
    supervisor finds it and aborts it (ClusterAction); the operator is refused."""
    config, _ = secured
    tls = StackTls.of(config.state_dir)
    connect = KafkaSettings(config.bootstrap_servers, security=tls.client("connect"))
    supervisor = KafkaSettings(config.bootstrap_servers, security=tls.client("supervisor"))
    topic = wire.topic_for(unique("held"))
    with Admin(roles.operator) as admin:
        admin.create_topics([topic])
    producer = kafka.KafkaProducer(
        **connect.options(), transactional_id=f"cdcbox-connect-{unique('held')}-0"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, key=b"k", value=b"{}").get(timeout=30)
        with TransactionAdmin(supervisor) as admin:
            (held,) = admin.open_transactions([topic])
        with TransactionAdmin(roles.operator) as admin:
            _refused("ClusterAuthorizationFailedError", lambda: admin.abort(held))
        with TransactionAdmin(supervisor) as admin:
            admin.abort(held)
            eventually(
                lambda: admin.open_transactions([topic]) == [],
                timeout=30,
                what="the transaction aborted",
            )
    finally:
        producer.close(timeout=5)


def test_a_stack_restart_keeps_the_grants_acls_apply_made(
    secured: tuple[StackConfig, Endpoints], roles: Roles
) -> None:
    """`stack up` grants the stack's roles on every start; it must not take back what
    `acls apply` granted the services since (they are in the same ledger)."""
    config, _ = secured
    grant_roles(config)  # what a restart of the stack does
    with AclAdmin(roles.admin) as admin:
        held = admin.list_allowed()
    assert [g for g in plan(roles.fleet) if cluster.row_of(g) not in held] == []
