"""``sluicegate demo --console`` as a new user runs it: the demo starts its own broker, prints
its summary, then keeps the job up with the console answering at the address it printed (the
Job, Checkpoints, Runs and Approvals pages over plain HTTP, and a screenshot of the Job page
in Debian's chromium); SIGTERM or SIGINT then stops every process it started, the broker
included, and it exits with the summary's code."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.helpers import wait_for_sync

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CONSOLE = re.compile(r"web console: (http://127\.0\.0\.1:\d+/console/) \(Ctrl-C stops the demo\)")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def screenshot(url: str, path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        driver.get(f"{url}job")
        assert "refund-desk" in driver.find_element(By.TAG_NAME, "main").text
        assert driver.save_screenshot(str(path))
    finally:
        driver.quit()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_the_demo_keeps_its_console_up_and_stops_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICEGATE_")}
    demo = subprocess.Popen(
        [sys.executable, "-m", "sluicegate", "demo", "--runs", "4", "--no-kill",
         "--approval-delay", "0.2", "--console"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: what is left of it can be found
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(demo.stdout or []), daemon=True)
    reader.start()

    def output() -> str:
        return "".join(lines[-40:])

    try:
        url = wait_for_sync(
            lambda: next((m.group(1) for line in lines if (m := CONSOLE.search(line))), None),
            timeout_s=300, interval_s=0.5, what="the demo's console address",
            details=output,
        )  # fmt: skip
        text = "".join(lines)
        assert "OK: every run finished once, no effect happened twice" in text
        assert text.index("runs finished:") < text.index("web console:")
        assert demo.poll() is None  # still up after the summary

        with httpx.Client(follow_redirects=True, timeout=30) as client:
            job = client.get(url)
            assert job.status_code == 200, job.text[:500]
            assert str(job.url).endswith("/console/job")
            assert "refund-desk" in job.text
            row = re.search(r"<tr><td>refund-desk</td>(.*?)</tr>", job.text, flags=re.S)
            assert row is not None, job.text[:2000]
            records_in = re.findall(r"<td>([^<]*)</td>", row.group(1))[-3]
            assert records_in.isdigit(), row.group(1)
            assert int(records_in) > 0, row.group(1)
            checkpoints = client.get(f"{url}checkpoints")
            assert (checkpoints.status_code, "completed" in checkpoints.text) == (200, True)
            runs = client.get(f"{url}runs", params={"agent": "refund-desk", "status": "done"})
            assert runs.status_code == 200
            # the 4 asked for, and the repeated requests the demo's memory refuses
            finished = re.search(r"runs finished: +(\d+) \(\{'done': (\d+)\}\)", text)
            assert finished is not None, output()
            done = int(finished.group(2))
            assert done == int(finished.group(1)) > 4, output()
            assert f"Runs 1 to {done} of {done}," in runs.text
            assert client.get(f"{url}approvals").status_code == 200
        if CHROMIUM.exists() and CHROMEDRIVER.exists():
            shot = tmp_path / "demo-job.png"
            screenshot(url, shot)
            assert shot.stat().st_size > 10_000

        demo.send_signal(stop)
        code = demo.wait(timeout=120)
        reader.join(timeout=10)
        assert code == 0, output()  # the summary's code: the stop was asked for
        wait_for_sync(
            lambda: not group_alive(demo.pid), timeout_s=30, interval_s=0.2,
            what="every process of the demo gone (coordinator, workers, broker)",
        )  # fmt: skip
        with pytest.raises(httpx.TransportError):
            httpx.get(url, timeout=5)
        assert f"demo stopped by {stop.name}" in "".join(lines), output()
    finally:
        if group_alive(demo.pid):
            os.killpg(demo.pid, signal.SIGKILL)
        demo.wait(timeout=30)
        if demo.stdout is not None:
            demo.stdout.close()
