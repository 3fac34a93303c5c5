"""What the adapter found in a faust ``App``: its agents, topics and tables as sluicegate will
run them, and what it refuses (value types only; `reading` builds them, `building` reads them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluicegate.faust_adapter.exceptions import UnsupportedFeatureError
from sluicegate.faust_adapter.ticking import Schedule

__all__ = [
    "AgentPlan", "FaustPlan", "Refusal", "Repartition", "TablePlan", "Take", "TimerPlan",
    "TopicPlan",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Refusal:
    """A feature the app uses that sluicegate does not run, and where it is used."""

    feature: str
    where: str
    hint: str = ""

    def error(self) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(self.feature, self.where, self.hint)


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """A Kafka topic of the app: its name, partition count, and faust ``Topic`` (its codecs)."""

    name: str
    partitions: int
    channel: Any


@dataclass(frozen=True, slots=True)
class Repartition:
    """``stream.group_by(key, ...)``: records re-keyed by ``key`` into ``topic`` (an internal
    topic of the job), which the agent's body then reads."""

    key: Any
    topic: TopicPlan
    where: str


@dataclass(frozen=True, slots=True)
class Take:
    """``stream.take(max_, within=...)`` (``kind`` also ``take_events`` or
    ``take_with_timestamp``): the agent's body gets batches of up to ``max_`` values of one
    input partition, a partial one ``within_s`` seconds after its oldest value arrived (None:
    only full ones), buffered in keyed state (`takes`)."""

    kind: str
    max_: int
    within_s: float | None
    where: str


@dataclass(frozen=True, slots=True)
class AgentPlan:
    """One ``@app.agent(topic)``: the operator ``uid`` that runs ``function`` over ``source``
    (through ``repartition`` when it groups), and the topics it may send to."""

    name: str
    uid: str
    function: Any
    source: TopicPlan
    repartition: Repartition | None
    sends: tuple[str, ...]
    sinks: tuple[str, ...]
    """Topics its ``yield``ed replies go to (``@app.agent(topic, sink=[...])``)."""
    where: str
    take: Take | None = None

    @property
    def body_input(self) -> TopicPlan:
        """The topic the agent's body reads: the repartition topic when it groups."""
        return self.repartition.topic if self.repartition is not None else self.source


@dataclass(frozen=True, slots=True)
class TimerPlan:
    """``@app.timer(interval)`` or ``@app.crontab(spec)`` (``kind``): the operator ``uid`` that
    calls ``function`` (with the app when it takes an argument, as faust does) once per tick
    of ``schedule`` (`ticking`), and the topics it may send to."""

    name: str
    uid: str
    kind: str
    function: Any
    schedule: Schedule
    sends: tuple[str, ...]
    where: str
    takes_app: bool = False
    """Whether ``function`` takes an argument (faust then passes the app)."""

    def call(self, app: Any) -> Any:
        """The coroutine of one firing."""
        return self.function(app) if self.takes_app else self.function()


@dataclass(frozen=True, slots=True)
class TablePlan:
    """``app.Table(name, default=...)``: keyed state rows ``table/<name>/<key>``."""

    name: str
    table: Any
    where: str


@dataclass(frozen=True, slots=True)
class FaustPlan:
    """The app as a sluicegate job; `refusals` is empty when it can run."""

    app: Any
    pipeline: str
    agents: tuple[AgentPlan, ...]
    topics: tuple[TopicPlan, ...]
    tables: tuple[TablePlan, ...]
    refusals: tuple[Refusal, ...]
    timers: tuple[TimerPlan, ...] = ()

    @property
    def clock_topic(self) -> str:
        """The one-partition source the timers' operators read: nothing is written to it; it
        gives them a partition to keep their state in and to be woken on."""
        return f"sluicegate.{self.pipeline}.clock"

    def topic(self, name: str) -> TopicPlan:
        return next(t for t in self.topics if t.name == name)

    def check(self) -> None:
        """Raise `UnsupportedFeatureError` for the first refusal, naming every other one."""
        if not self.refusals:
            return
        first = self.refusals[0].error()
        if len(self.refusals) > 1:
            others = "; ".join(f"{r.where}: {r.feature}" for r in self.refusals[1:])
            first.args = (f"{first.args[0]} (also refused: {others})",)
        raise first
