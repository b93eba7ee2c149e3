"""A Ray cluster of several nodes on this one machine, and an MLflow tracking server, for tests.

Every node is started with ``ray start``, as a user would start it, with its own temp dir under
one short root directory (Ray's unix socket paths must stay under 108 characters) and with HOME
pointed into that root, since Ray 2.60 writes ``~/.ray``. Dashboard and Jobs API listen on
127.0.0.1 only; every node reports this machine's IP (``ray start`` turns a loopback
``--node-ip-address`` into it anyway).

Processes are found by a directory in their command line plus all their descendants (Ray's
workers rename themselves ``ray::...``, so only their parents show the directory). That way,
stopping the cluster, or killing one node the way a preempted VM dies, touches nothing but this
cluster's processes. ``ray stop --force`` is never used: it ends every Ray process of the user on
the machine, other sessions' clusters included. ``ray.cluster_utils.AutoscalingCluster`` runs it in
both ``start`` and ``shutdown`` (and in Ray 2.60 it also reads an ``example.yaml`` that the wheel
does not ship), so :func:`fake_autoscaling_config` and :class:`LocalCluster` do its job by hand
with the same fake multi-node provider.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

RAY = str(Path(sys.executable).parent / "ray")

FAST_FAILURE_DETECTION = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 5000,
    "health_check_failure_threshold": 5,
}
"""GCS settings that notice a killed node in about 5 s instead of about 15-30 s. A killed raylet
refuses the health check at once, so five checks a second apart suffice; a raylet that is only
slow on a loaded machine gets 5 s per check before a check counts as missed."""


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port nobody listens on right now (on 127.0.0.1), never one this process was handed
    before: the kernel may give a just-closed port out again at once, and a head started with the
    same number for GCS and dashboard refuses to start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    """Polls ``predicate`` until it returns something truthy, which is returned; fails after
    ``timeout_s`` with ``what`` in the message."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


# --------------------------------------------------------------------------------------------
# Processes


def processes_under(directory: Path) -> set[psutil.Process]:
    """Live processes whose command line names ``directory`` (or a path inside it), or whose
    ``TMPDIR`` lies in it, with all their descendants (this process excepted).

    The environment finds what no command line names: ``ray start --head`` launches the Ray client
    server (``ray.util.client.server``) with only addresses on its command line, and it outlives
    ``ray start``, reparented to init. Every node here starts with ``TMPDIR`` in its cluster's
    root (:meth:`LocalCluster.env`)."""
    pattern = re.compile(re.escape(str(directory)) + r"(?=/|$|\s|'|\")")
    roots = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        with contextlib.suppress(psutil.Error):
            marks = [*(proc.info["cmdline"] or ()), (proc.info["environ"] or {}).get("TMPDIR", "")]
            if proc.pid != os.getpid() and any(pattern.search(part) for part in marks):
                roots.append(proc)
    family = set(roots)
    for proc in roots:
        with contextlib.suppress(psutil.Error):
            family.update(proc.children(recursive=True))
    return {p for p in family if running(p.pid)}


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie's parent, not us, must reap it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: Iterable[psutil.Process], timeout_s: float) -> set[psutil.Process]:
    """Waits until every process has exited; returns those still running."""
    deadline = time.monotonic() + timeout_s
    alive = set(procs)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if running(p.pid)}
        if alive:
            time.sleep(0.1)
    return alive


def end_processes(find: Callable[[], set[psutil.Process]], *, graceful: bool = True) -> set[int]:
    """Ends every process ``find`` returns (TERM then KILL, or KILL at once), sweeping again until
    nothing is left (a dying raylet may still spawn a worker); returns the pids ended."""
    ended: set[int] = set()
    for _ in range(4):
        family = find()
        if not family:
            break
        for proc in family:
            with contextlib.suppress(psutil.Error):
                proc.terminate() if graceful else proc.kill()
        alive = wait_gone(family, timeout_s=3 if graceful else 2)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        wait_gone(alive, timeout_s=5)
        ended.update(p.pid for p in family)
    return ended


# --------------------------------------------------------------------------------------------
# The Ray cluster


@dataclass
class Node:
    """One ``ray start`` node of a :class:`LocalCluster`."""

    name: str
    temp_dir: Path
    num_cpus: float
    node_id: str = ""


@dataclass
class LocalCluster:
    """A head node (dashboard and Jobs API on 127.0.0.1) plus worker nodes, all on this machine.

    ``head_cpus=0`` mirrors the cluster YAMLs: the head runs job drivers (and with
    ``num_learners=0`` the learner, which asks for no CPU) but no env runner, so env runners must go
    to worker nodes. ``autoscaling_config`` (see :func:`fake_autoscaling_config`) starts Ray's
    autoscaler with the fake multi-node provider, which launches and removes worker nodes itself.
    """

    root: Path
    head_cpus: float = 0
    object_store_mb: int = 100
    system_config: dict[str, Any] = field(default_factory=lambda: dict(FAST_FAILURE_DETECTION))
    autoscaling_config: dict[str, Any] | None = None
    gcs_port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    workers: dict[str, Node] = field(default_factory=dict)
    _serial: int = 0

    @property
    def address(self) -> str:
        """The Jobs API / dashboard URL (what ``orchestrl submit --address`` takes)."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def head_temp_dir(self) -> Path:
        return self.root / "head"

    def env(self) -> dict[str, str]:
        """The environment every node (and so every job driver and worker) starts with. TMPDIR
        too: processes a test kills leave their temp files (multiprocessing's ``pymp-*``) behind."""
        env = {**os.environ, "HOME": str(self.home), "TMPDIR": str(self.tmp), "RAY_USAGE_STATS_ENABLED": "0"}
        env.update({"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONUNBUFFERED": "1"})
        env.pop("RAY_ADDRESS", None)
        if self.autoscaling_config is not None:
            env.update({"RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"})
        return env

    def start(self, timeout_s: float = 120) -> None:
        """Starts the head and waits until its Jobs API answers."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        command = [
            RAY, "start", "--head",
            f"--port={self.gcs_port}",
            "--node-name=head",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            *self._side_ports(),
            f"--ray-client-server-port={free_port()}",
            f"--temp-dir={self.head_temp_dir}",
            f"--num-cpus={self.head_cpus:g}",
            f"--object-store-memory={self.object_store_mb * 2**20}",
            "--include-dashboard=true",
            "--disable-usage-stats",
        ]  # fmt: skip
        if self.system_config:
            command.append(f"--system-config={json.dumps(self.system_config, separators=(',', ':'))}")
        if self.autoscaling_config is not None:
            config = {**self.autoscaling_config}
            config["provider"] = {**config["provider"], "gcs_address": self.gcs_address}
            path = self.root / "autoscaling.yaml"
            path.write_text(json.dumps(config))  # JSON is YAML
            command.append(f"--autoscaling-config={path}")
        self._run(command, timeout_s)
        wait_for(lambda: _answers(self.address), 30, f"the Jobs API at {self.address}")

    def add_workers(self, names: list[str], num_cpus: float = 1, timeout_s: float = 120) -> list[Node]:
        """Starts one worker node per name, concurrently, each with ``num_cpus`` logical CPUs, and
        waits until the head lists them all."""
        nodes = [Node(name=name, temp_dir=self.root / name, num_cpus=num_cpus) for name in names]
        starting = []
        for node in nodes:
            command = [
                RAY, "start",
                f"--address={self.gcs_address}",
                f"--node-name={node.name}",
                f"--temp-dir={node.temp_dir}",
                *self._side_ports(),
                f"--num-cpus={num_cpus:g}",
                f"--object-store-memory={self.object_store_mb * 2**20}",
                "--disable-usage-stats",
            ]  # fmt: skip
            starting.append(
                subprocess.Popen(
                    command, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        for node, proc in zip(nodes, starting, strict=True):
            _, stderr = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"ray start of node {node.name} failed ({proc.returncode}): {stderr[-2000:]}"
                )

        def joined() -> dict[str, str] | None:
            ids = {n.node_name: n.node_id for n in self.nodes() if n.state == "ALIVE"}
            return ids if all(node.name in ids for node in nodes) else None

        ids = wait_for(joined, 30, f"nodes {names} to join")
        for node in nodes:
            node.node_id = ids[node.name]
            self.workers[node.name] = node
        return nodes

    def ensure_workers(self, count: int, num_cpus: float = 1) -> list[Node]:
        """Adds worker nodes (named ``w1``, ``w2``, ... in order of creation) until ``count`` of them
        are up, e.g. to replace one a test killed, as the autoscaler replaces a preempted VM."""
        missing = count - len(self.workers)
        if missing > 0:
            names = [f"w{self._serial + i + 1}" for i in range(missing)]
            self._serial += missing
            self.add_workers(names, num_cpus=num_cpus)
        return list(self.workers.values())

    def _side_ports(self) -> list[str]:
        """Explicit free ports for the per-node agents: their defaults are fixed numbers, which two
        nodes on one machine (or another engineer's cluster) would fight over."""
        return [
            f"--dashboard-agent-listen-port={free_port()}",
            f"--metrics-export-port={free_port()}",
        ]

    def _run(self, command: list[str], timeout_s: float) -> None:
        done = subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:3])} failed ({done.returncode}): {done.stderr[-2000:]}")

    def nodes(self) -> list[Any]:
        """Every node the head knows (alive and dead), as Ray's state API reports them."""
        from ray.util.state import list_nodes

        return list_nodes(address=self.address, raise_on_missing_output=False)

    def alive_nodes(self) -> list[Any]:
        return [n for n in self.nodes() if n.state == "ALIVE"]

    def kill_worker(self, name: str, timeout_s: float = 60) -> set[int]:
        """SIGKILLs every process of worker node ``name`` at once (raylet, agents, its actors and
        tasks), as when a spot VM is reclaimed, and waits until the head marks the node dead."""
        node = self.workers.pop(name)
        pids = end_processes(lambda: processes_under(node.temp_dir), graceful=False)
        wait_for(
            lambda: any(n.node_id == node.node_id and n.state == "DEAD" for n in self.nodes()),
            timeout_s,
            f"the head to mark node {name} dead",
        )
        return pids

    def processes(self) -> set[psutil.Process]:
        """Every live process of this cluster, on all its nodes."""
        return processes_under(self.root)

    def shutdown(self, graceful: bool = False) -> set[int]:
        """Ends every process of the cluster, on all nodes at once, and returns their pids.

        SIGKILL by default: the cluster is thrown away with its temp dir, and a graceful Ray
        shutdown on a busy machine takes many seconds (raylets start new workers while dying)."""
        self.workers.clear()
        return end_processes(self.processes, graceful=graceful)


def _answers(address: str) -> bool:
    from orchestrl.cluster.connection import connect
    from orchestrl.cluster.errors import ClusterUnreachableError

    try:
        connect(address, timeout_s=2)
    except ClusterUnreachableError:
        return False
    return True


def fake_autoscaling_config(
    worker_types: dict[str, dict[str, Any]], *, idle_timeout_minutes: float, max_workers: int
) -> dict[str, Any]:
    """An autoscaler config for Ray's fake multi-node provider (``type: fake_multinode``).

    The same keys as Ray's own ``fake_multi_node/example.yaml``. ``worker_types`` maps a node type to
    ``{"resources": {...}, "min_workers": n, "max_workers": m}``; the provider starts such nodes as
    processes of the autoscaler (the ``monitor.py`` process on the head).
    """
    types: dict[str, dict[str, Any]] = {
        "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0}
    }
    for name, spec in worker_types.items():
        types[name] = {"node_config": {}, **spec}
    return {
        "cluster_name": "orchestrl-fake",
        "max_workers": max_workers,
        "provider": {
            "type": "fake_multinode",
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
        },
        "available_node_types": types,
        "head_node_type": "ray.head.default",
        "auth": {},
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": idle_timeout_minutes,
        "docker": {},
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
    }


def new_root(prefix: str) -> Path:
    """A short temp dir for a cluster (socket paths under it must stay below 108 characters)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


# --------------------------------------------------------------------------------------------
# The MLflow server


@dataclass
class MlflowServer:
    """``mlflow server`` on 127.0.0.1: a SQLite backend and proxied artifacts, both under ``root``.

    Artifacts go through the server (``--artifacts-destination``), as on a cluster whose nodes share
    no disk with the server. The server runs in its own session, so stopping it ends its workers
    too.
    """

    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120) -> None:
        """Launches the server and waits until it answers."""
        self.launch()
        self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Launches the server without waiting (it needs ~10-30 s to boot; start a cluster meanwhile)."""
        self.root.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
            "--artifacts-destination", str(self.root / "artifacts"),
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
        ]  # fmt: skip
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HOME": str(self.root)}
        env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"  # no job-runner process: boots faster
        log = (self.root / "server.log").open("w")
        self.process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def wait_ready(self, timeout_s: float = 120) -> None:
        wait_for(self._healthy, timeout_s, f"the MLflow server at {self.uri}")

    def _healthy(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            log = (self.root / "server.log").read_text()[-2000:]
            raise RuntimeError(f"mlflow server exited with {self.process.returncode}: {log}")
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def processes(self) -> set[psutil.Process]:
        if self.process is None or not running(self.process.pid):
            return set()
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(self.process.pid)
            return {parent, *parent.children(recursive=True)}
        return set()

    def stop(self) -> set[int]:
        """Ends the server and its workers; returns their pids."""
        if self.process is None:
            return set()
        family = self.processes()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for proc in wait_gone(family, timeout_s=5):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        return {p.pid for p in family}


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
