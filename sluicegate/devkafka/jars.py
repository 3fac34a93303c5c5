"""The dev broker's jars: the pinned pom, the cache outside the repo, and fetching with Maven.

The jars are fetched once per pom content into ``<kafka_home>/kafka-<version>/libs`` and marked
complete with the pom's hash, so editing ``deploy/kafka/pom.xml`` fetches afresh. A file lock
lets two processes (two test sessions, say) ask at once without fetching twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from sluicegate.devkafka.exceptions import BrokerStartError, MissingToolError

__all__ = ["KAFKA_VERSION", "broker_resources", "default_kafka_home", "ensure_jars", "require_tool"]

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the dev broker runs; keep in step with ``deploy/kafka/pom.xml``."""

_MARKER = ".fetched-from-pom-sha256"
_FETCH_TIMEOUT_S = 900

logger = logging.getLogger(__name__)

_TOOL_HINTS = {
    "java": (
        "The dev broker needs a Java 17+ runtime (Debian/Ubuntu: apt-get install "
        "openjdk-17-jre-headless), or run Kafka elsewhere (docker compose up kafka) and set "
        "SLUICEGATE_KAFKA_BOOTSTRAP=host:port."
    ),
    "mvn": (
        "Fetching the dev broker's jars needs Maven (Debian/Ubuntu: apt-get install maven), "
        "or run Kafka elsewhere (docker compose up kafka) and set SLUICEGATE_KAFKA_BOOTSTRAP."
    ),
}


def require_tool(name: str) -> str:
    """Return the path of ``name`` on PATH, or raise `MissingToolError` saying what to install."""
    path = shutil.which(name)
    if path is None:
        raise MissingToolError(name, _TOOL_HINTS.get(name, ""))
    return path


def broker_resources() -> Path:
    """The folder holding pom.xml, server.properties and log4j2.properties.

    An installed wheel carries them inside the package; a source checkout has them in
    ``deploy/kafka``.
    """
    packaged = Path(__file__).parent / "resources"
    if (packaged / "pom.xml").is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "deploy" / "kafka"


def default_kafka_home() -> Path:
    """``$XDG_CACHE_HOME/sluicegate`` (``~/.cache/sluicegate`` when unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sluicegate"


def ensure_jars(kafka_home: Path | None = None) -> Path:
    """Return the folder of the broker's jars, fetching them with Maven if absent.

    Steps, under an exclusive file lock:

    1. if ``libs`` carries the marker for this pom's hash, return it;
    2. run ``mvn dependency:copy-dependencies`` into a temporary sibling folder;
    3. write the marker, then rename the folder into place (a crash leaves no half folder).
    """
    pom = broker_resources() / "pom.xml"
    pom_hash = hashlib.sha256(pom.read_bytes()).hexdigest()
    root = (kafka_home or default_kafka_home()) / f"kafka-{KAFKA_VERSION}"
    libs = root / "libs"
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(libs, pom_hash):
            return libs
        mvn = require_tool("mvn")
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=root))
        logger.info("fetching Apache Kafka %s jars into %s (once)", KAFKA_VERSION, libs)
        command = [
            mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_FETCH_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise BrokerStartError(f"mvn did not finish in {_FETCH_TIMEOUT_S}s") from exc
        if done.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
            shutil.rmtree(staging, ignore_errors=True)
            raise BrokerStartError(
                "could not fetch the Kafka jars with Maven (is Maven Central reachable?)",
                (done.stdout + done.stderr)[-4000:],
            )
        (staging / _MARKER).write_text(pom_hash)
        if libs.exists():
            shutil.rmtree(libs)
        staging.rename(libs)
        return libs


def _is_complete(libs: Path, pom_hash: str) -> bool:
    marker = libs / _MARKER
    return marker.is_file() and marker.read_text().strip() == pom_hash
