"""A client for distrl's control protocol (docs/protocol.md), for scripts
and notebooks that drive a running trial.

    from distrl.client import Trial
    trial = Trial("cartpole-ppo", "t1")             # etcd on 127.0.0.1:2379
    trial.workers()                                 # {"actor/0": "10.0.0.5:41234", ...}
    trial.statuses()["trainer/0"]["state"]          # "RUNNING"
    trial.request("trainer/0", "stats")["mean_return"]
    trial.group_request("actor/*", "stats")         # {"actor/0": {...}, "actor/1": {...}}

Workers are found through the trial's name records in etcd, read over
etcd's JSON gateway (``/v3/kv/range``), so nothing beyond pyzmq and msgpack
is needed. An etcd with TLS or authentication (docs/cluster.md, "A shared
etcd") takes rlctl's settings: the ``cacert``, ``cert``, ``key``, ``user``
and ``password`` arguments, by default $RLCTL_NAMERESOLVE_CACERT and the
others. Requests are ``[command, kwargs]`` in msgpack over ZeroMQ; a
failed request raises RPCError with the worker's error type and message.
"""

import base64
import fnmatch
import json
import os
import ssl
import time
import urllib.error
import urllib.request

import msgpack
import zmq

DEFAULT_ROOT = "distrl"


class RPCError(Exception):
    """A worker answered a request with an error."""

    def __init__(self, type, message):
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message


class EtcdError(Exception):
    """etcd refused a request: wrong credentials, a role without permission, ..."""

    def __init__(self, status, message):
        super().__init__(f"etcd: {message} (HTTP {status})")
        self.status = status
        self.message = message


def _endpoint(address):
    return address if "://" in address else "tcp://" + address


def _unpack(raw):
    reply = msgpack.unpackb(raw, raw=False)
    if not isinstance(reply, dict):
        raise RPCError("bad_reply", f"reply is a {type(reply).__name__}, want a map")
    if "error" in reply:
        err = reply["error"] or {}
        return RPCError(err.get("type", "unknown"), err.get("message", ""))
    return reply.get("ok")


class Trial:
    """The workers of one trial, found through its name records.

    ``nameresolve`` is an etcd endpoint ("host:port" or a URL; default
    $RLCTL_NAMERESOLVE or 127.0.0.1:2379). ``server_public`` is a worker
    public CURVE key when the trial runs with --curve-keys. ``cacert``,
    ``cert`` and ``key`` are PEM files for TLS (with any of them a
    "host:port" endpoint speaks https), ``user`` ("name" or
    "name:password") and ``password`` etcd's authentication; each defaults
    to rlctl's environment variable ($RLCTL_NAMERESOLVE_CACERT, ...).
    """

    def __init__(self, experiment, trial, nameresolve=None, timeout_ms=10000, server_public=None, root=DEFAULT_ROOT,
                 cacert=None, cert=None, key=None, user=None, password=None):
        env = os.environ.get
        cacert = cacert or env("RLCTL_NAMERESOLVE_CACERT")
        cert = cert or env("RLCTL_NAMERESOLVE_CERT")
        key = key or env("RLCTL_NAMERESOLVE_KEY")
        user = user or env("RLCTL_NAMERESOLVE_USER")
        password = password or env("RLCTL_NAMERESOLVE_PASSWORD")
        nr = nameresolve or env("RLCTL_NAMERESOLVE", "127.0.0.1:2379")
        nr = nr.split(",")[0]
        if not nr.startswith("http"):
            nr = ("https://" if cacert or cert or key else "http://") + nr
        self.etcd = nr
        self._ssl = None
        if nr.startswith("https://"):
            self._ssl = ssl.create_default_context(cafile=cacert)
            if cert:
                self._ssl.load_cert_chain(cert, key)
        if user and not password:
            user, _, password = user.partition(":")
        if user and not password:
            raise ValueError(f"etcd user {user!r} has no password (give name:password, or password=)")
        self._user, self._password, self._token = user, password, None
        self.prefix = f"{root}/{experiment}/{trial}/"
        self.timeout_ms = timeout_ms
        self.server_public = server_public
        self.ctx = zmq.Context.instance()

    # -- name records ----------------------------------------------------

    def _post(self, path, body):
        headers = {"Content-Type": "application/json"}
        if self._token:
            headers["Authorization"] = self._token
        req = urllib.request.Request(self.etcd + path, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_ms / 1000, context=self._ssl) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            try:
                message = json.load(e).get("message", e.reason)
            except ValueError:
                message = e.reason
            raise EtcdError(e.code, message) from None

    def _authed(self, path, body):
        """Posts with etcd's token, authenticating first and again once when it is refused (expired)."""
        for attempt in range(2):
            if self._user and (not self._token or attempt):
                self._token = None
                self._token = self._post("/v3/auth/authenticate", {"name": self._user, "password": self._password})["token"]
            try:
                return self._post(path, body)
            except EtcdError as e:
                if not self._user or attempt or "auth token" not in e.message:
                    raise

    def _range(self, prefix):
        key = prefix.encode()
        end = key[:-1] + bytes([key[-1] + 1])
        body = {"key": base64.b64encode(key).decode(), "range_end": base64.b64encode(end).decode()}
        kvs = self._authed("/v3/kv/range", body).get("kvs", [])
        out = {}
        for kv in kvs:
            k = base64.b64decode(kv["key"]).decode()
            out[k[len(prefix):]] = base64.b64decode(kv.get("value", "")).decode()
        return out

    def workers(self):
        """Maps each registered worker's name to its address, sorted by name."""
        return dict(sorted(self._range(self.prefix + "worker/").items()))

    def statuses(self):
        """Maps each worker's name to its status record (state, error, warning, ...)."""
        return {name: json.loads(v) for name, v in sorted(self._range(self.prefix + "status/").items())}

    def match(self, pattern):
        """The names of the workers matching a glob ("actor/*"; "*" is every worker)."""
        return [w for w in self.workers() if pattern == "*" or fnmatch.fnmatchcase(w, pattern)]

    # -- requests --------------------------------------------------------

    def _socket(self, kind, address):
        sock = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        if self.server_public:
            sock.curve_serverkey = self.server_public.encode()
            sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.connect(_endpoint(address))
        return sock

    def request(self, worker, command, **kwargs):
        """Sends one command to one worker and returns its result."""
        addr = self.workers().get(worker)
        if addr is None:
            raise RPCError("not_found", f"no worker {worker} in {self.prefix}")
        res = self._gather({worker: addr}, command, kwargs)[worker]
        if isinstance(res, Exception):
            raise res
        return res

    def group_request(self, workers, command, **kwargs):
        """Sends one command to many workers at once: a list of names or a
        glob ("actor/*", "*"). Returns {name: result}, where a failure is
        the RPCError (or TimeoutError) instead of a result."""
        known = self.workers()
        if isinstance(workers, str):
            names = [w for w in known if workers == "*" or fnmatch.fnmatchcase(w, workers)]
        else:
            names = list(workers)
        missing = [w for w in names if w not in known]
        out = {w: RPCError("not_found", f"no worker {w} in {self.prefix}") for w in missing}
        out.update(self._gather({w: known[w] for w in names if w in known}, command, kwargs))
        return out

    def _gather(self, addrs, command, kwargs):
        socks = {}
        poller = zmq.Poller()
        try:
            for name, addr in addrs.items():
                s = self._socket(zmq.DEALER, addr)
                # The request names its worker: the workers one process
                # hosts share its address.
                payload = msgpack.packb([command, kwargs, name], use_bin_type=True)
                s.send_multipart([b"\x00" * 8, b"", payload])
                socks[s] = name
                poller.register(s, zmq.POLLIN)
            out = {}
            deadline = time.monotonic() + self.timeout_ms / 1000
            while len(out) < len(socks):
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0:
                    break
                events = dict(poller.poll(left_ms))
                for s in events:
                    frames = s.recv_multipart()
                    if len(frames) == 3 and frames[1] == b"":
                        out[socks[s]] = _unpack(frames[2])
            for name in socks.values():
                out.setdefault(name, TimeoutError(f"{command} to {name}: no reply within {self.timeout_ms} ms"))
            return out
        finally:
            for s in socks:
                s.close()
