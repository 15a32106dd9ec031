"""The environment host a distrl actor starts: ``python3 -m distrl.envhost ADDRESS``.

It connects a ZeroMQ PAIR socket to ADDRESS (the actor binds it, an ipc://
path in a private temporary directory), says ``{"hello": {"protocol": 1,
"pid"}}`` and answers one msgpack map per request, strictly in turn:

``{"op": "init", "module", "factory", "kwargs", "n", "path"}``
    imports ``module`` (after putting the directories of ``path`` first on
    ``sys.path``) and calls ``factory(**kwargs)`` ``n`` times. The reply
    describes the agents and the spaces of one agent.
``{"op": "batch", "reset_envs", "seeds", "step_envs", "actions"}``
    resets some environments with their seeds, then steps others with the
    actions tensor (int64 ``[k, agents]`` for a Discrete action space,
    float32 ``[k, agents, d]`` for a Box), all in one message.
``{"op": "close"}``
    closes the environments and exits.

Replies are ``{"ok": ...}`` or ``{"error": {"type", "message",
"traceback"}}``; the traceback also goes to stderr, which the actor logs.
Environments follow the gymnasium API (``reset(seed=...) -> (obs, info)``,
``step(action) -> (obs, reward, terminated, truncated, info)``) or, when
they have ``possible_agents``, PettingZoo's parallel API. gymnasium is
never imported; spaces are read by their class name and attributes.

The host exits when its parent process is gone, so it never outlives the
actor that started it.
"""

import importlib
import math
import numbers
import os
import sys
import traceback

import msgpack
import zmq

from . import wire

try:  # numpy is optional; it only speeds up flattening and shaping.
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    np = None

PROTOCOL = 1
# How often (ms) an idle host checks that its parent is alive.
PARENT_CHECK_MS = 500


class HostError(Exception):
    """A failure the host reports to the actor as {"error": ...}."""

    def __init__(self, type, message, tb=""):
        super().__init__(message)
        self.type = type
        self.message = message
        self.tb = tb


_SCALARS = (float, int, bool)


def flatten(x):
    """Flattens an observation (scalar, nested sequence or array) to floats."""
    t = type(x)
    if t is list or t is tuple:
        # The common case, a flat list of numbers, is returned as it is.
        if not x or type(x[0]) in _SCALARS:
            return x
    elif t in _SCALARS:
        return [x]
    if np is not None and isinstance(x, np.ndarray):
        return x.ravel().tolist()
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            if isinstance(v, (list, tuple)) or hasattr(v, "tolist"):
                out.extend(flatten(v))
            else:
                out.append(v)
        return out
    return [x]


class ObsBuffer:
    """Collects the observations of a reply as float32 rows of obs_dim. Plain
    Python values go to a list encoded at the end; numpy arrays, the usual
    case of gymnasium environments, go straight to a numpy buffer."""

    def __init__(self, rows, dim):
        self.rows, self.dim = rows, dim
        self.flat = []
        self.arr = None
        self.n = 0

    def add(self, env, o):
        if o is None:
            o = [0.0] * self.dim
        if np is not None and isinstance(o, np.ndarray):
            if o.size != self.dim:
                raise HostError("env_error", f"env {env}: observation has {o.size} values, the observation space {self.dim}")
            if self.arr is None:
                self.arr = np.empty((self.rows, self.dim), dtype=np.float32)
                if self.flat:
                    self.arr[: self.n] = np.asarray(self.flat, dtype=np.float32).reshape(self.n, self.dim)
            self.arr[self.n] = o.reshape(-1)
            self.n += 1
            return
        v = flatten(o)
        if len(v) != self.dim:
            raise HostError("env_error", f"env {env}: observation has {len(v)} values, the observation space {self.dim}")
        if self.arr is not None:
            self.arr[self.n] = v
        else:
            self.flat.extend(v)
        self.n += 1

    def encode(self, shape):
        if self.arr is None:
            return wire.encode(self.flat, shape)
        return {"dtype": "float32", "shape": list(shape), "data": self.arr[: self.n].astype("<f4", copy=False).tobytes()}


def describe_space(space):
    """Describes a space for the Go side; unknown kinds carry only their name."""
    name = type(space).__name__
    if name == "Discrete":
        return {"kind": "Discrete", "n": int(space.n), "start": int(getattr(space, "start", 0))}
    if name == "MultiDiscrete":
        return {"kind": "MultiDiscrete", "nvec": [int(v) for v in flatten(space.nvec)]}
    if name == "Box":
        shape = [int(d) for d in space.shape]
        n = 1
        for d in shape:
            n *= d
        low, high = flatten(space.low), flatten(space.high)
        if len(low) == 1:
            low = low * n
        if len(high) == 1:
            high = high * n
        return {"kind": "Box", "shape": shape,
                "low": wire.encode([float(v) for v in low], [n]),
                "high": wire.encode([float(v) for v in high], [n])}
    return {"kind": name}


def _numeric_info(info, out):
    """Adds the numeric values of an info dict to out (key -> list of values)."""
    if not isinstance(info, dict):
        return
    for k, v in info.items():
        t = type(v)
        if t is float or t is int or (t is not bool and isinstance(v, numbers.Real)):
            if isinstance(k, str):
                out.setdefault(k, []).append(float(v))


def _split_reset(res):
    """reset() returns (obs, info); an older env may return obs alone."""
    if isinstance(res, tuple) and len(res) == 2 and isinstance(res[1], dict):
        return res
    return res, {}


class SingleAgent:
    """Adapts a gymnasium-style environment: one agent, "agent_0". Host._step
    calls the environment's step itself: that loop is the host's hot path."""

    turns = False

    def __init__(self, env):
        self.env = env
        self.agents = ["agent_0"]
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def reset(self, seed):
        obs, _ = _split_reset(self.env.reset(seed=seed))
        return [obs]

    def close(self):
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


class Parallel:
    """Adapts a PettingZoo parallel environment. Every agent of
    possible_agents must share one observation space and one action space
    (they share a policy). Every agent acts at every step, unless the
    environment has acting(): then its agents take turns, and acting()
    names the agents whose actions the next step applies (after reset and
    after every step of a live episode)."""

    def __init__(self, env):
        self.env = env
        self.agents = [str(a) for a in env.possible_agents]
        self._ids = list(env.possible_agents)
        self.turns = callable(getattr(env, "acting", None))
        if not self.agents:
            raise HostError("unsupported_env", "the parallel environment has no possible_agents")
        spaces = {}
        for kind in ("observation_space", "action_space"):
            descs = [describe_space(getattr(env, kind)(a)) for a in self._ids]
            if any(d != descs[0] for d in descs):
                raise HostError("unsupported_space",
                                f"agents have different {kind.replace('_', ' ')}s; distrl's agents share one policy")
            spaces[kind] = getattr(env, kind)(self._ids[0])
        self.observation_space = spaces["observation_space"]
        self.action_space = spaces["action_space"]

    def reset(self, seed):
        obs, _ = _split_reset(self.env.reset(seed=seed))
        missing = [a for a in self._ids if a not in obs]
        if missing:
            raise TypeError(f"reset returned no observation for agents {missing}")
        return [obs[a] for a in self._ids]

    def step(self, actions):
        live = set(getattr(self.env, "agents", self._ids))
        res = self.env.step({a: act for a, act in zip(self._ids, actions) if a in live})
        if not isinstance(res, tuple) or len(res) != 5:
            raise TypeError("step must return (observations, rewards, terminations, truncations, infos)")
        obs, rewards, terms, truncs, infos = res
        # An agent gone from the outputs has ended: zero observation, no reward.
        o = [obs.get(a) for a in self._ids]
        r = [rewards.get(a, 0.0) for a in self._ids]
        te = [terms.get(a, a not in obs) for a in self._ids]
        tr = [truncs.get(a, False) for a in self._ids]
        merged = {}
        for a in self._ids:
            _numeric_info(infos.get(a) if isinstance(infos, dict) else None, merged)
        return o, r, te, tr, merged

    def acting(self):
        """acting() as 0 or 1 per agent of possible_agents."""
        got = self.env.acting()
        if isinstance(got, (str, bytes)) or not hasattr(got, "__iter__"):
            raise TypeError(f"acting() must return agent ids, got {got!r}")
        names = set(got)
        unknown = names - set(self._ids)
        if unknown:
            raise TypeError(f"acting() named agents not in possible_agents: {sorted(map(str, unknown))}")
        row = [1 if a in names else 0 for a in self._ids]
        if not any(row):
            raise TypeError("acting() named no agent")
        return row

    def close(self):
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


def adapt(env):
    """Wraps env in the adapter for its API."""
    if hasattr(env, "possible_agents") and callable(getattr(env, "observation_space", None)):
        return Parallel(env)
    for attr in ("reset", "step", "observation_space", "action_space"):
        if not hasattr(env, attr):
            raise HostError("unsupported_env", f"the environment ({type(env).__name__}) has no {attr}")
    return SingleAgent(env)


class Host:
    """The environments of one actor and the handling of its requests."""

    def __init__(self):
        self.envs = []
        self.agents = []
        self.obs_dim = 0
        self.action = None  # the action space's description
        self.turns = False  # the environments' agents take turns (Parallel.acting)

    # -- requests --------------------------------------------------------

    def handle(self, msg):
        if not isinstance(msg, dict):
            raise HostError("bad_request", f"request is a {type(msg).__name__}, want a map")
        op = msg.get("op")
        if op == "init":
            return self.init(msg)
        if op == "batch":
            if not self.envs:
                raise HostError("bad_request", "batch before init")
            return self.batch(msg)
        if op == "close":
            return self.close()
        raise HostError("bad_request", f"unknown op {op!r}")

    def init(self, msg):
        if self.envs:
            raise HostError("bad_request", "init twice")
        module, factory = msg.get("module"), msg.get("factory") or "make_env"
        kwargs, n = msg.get("kwargs") or {}, msg.get("n")
        if not isinstance(module, str) or not module:
            raise HostError("bad_request", "init needs a module name")
        if not isinstance(n, int) or n < 1:
            raise HostError("bad_request", f"init needs n >= 1, got {n!r}")
        if not isinstance(kwargs, dict):
            raise HostError("bad_request", "kwargs must be a map")
        for p in reversed(msg.get("path") or []):
            sys.path.insert(0, p)
        try:
            mod = importlib.import_module(module)
        except BaseException as e:  # SyntaxError, SystemExit from a module: all are the user's
            raise HostError("import_error", f"import {module}: {type(e).__name__}: {e}", traceback.format_exc())
        make = getattr(mod, factory, None)
        if not callable(make):
            raise HostError("import_error", f"module {module} has no callable {factory}")
        for i in range(n):
            try:
                env = make(**kwargs)
            except Exception as e:
                raise HostError("env_error", f"{module}.{factory}(): {type(e).__name__}: {e}", traceback.format_exc())
            self.envs.append(adapt(env))
        first = self.envs[0]
        self.agents = first.agents
        self.turns = first.turns
        obs, act = describe_space(first.observation_space), describe_space(first.action_space)
        self.obs_dim = _space_size(obs)
        self.action = act
        out = {"protocol": PROTOCOL, "agents": self.agents, "observation_space": obs, "action_space": act,
               "python": sys.version.split()[0], "numpy": np is not None}
        # An environment whose observations say which actions are available:
        # action i is where the observation holds more than 0.5 at index
        # action_mask_indices[i] (the Go side checks the indices).
        mask = getattr(first.env, "action_mask_indices", None)
        if mask is not None:
            try:
                out["action_mask"] = [int(i) for i in mask]
            except (TypeError, ValueError) as e:
                raise HostError("unsupported_space", f"action_mask_indices must be integers: {e}")
        return out

    def batch(self, msg):
        out = {}
        reset_envs, seeds = msg.get("reset_envs") or [], msg.get("seeds") or []
        if len(reset_envs) != len(seeds):
            raise HostError("bad_request", f"{len(reset_envs)} envs to reset with {len(seeds)} seeds")
        if reset_envs:
            buf = ObsBuffer(len(reset_envs) * len(self.agents), self.obs_dim)
            acting = []
            for i, seed in zip(reset_envs, seeds):
                env = self._env(i)
                for o in self._call(i, "reset", env.reset, seed):
                    buf.add(i, o)
                if self.turns:
                    acting.extend(self._call(i, "acting", env.acting))
            out["reset_obs"] = buf.encode([len(reset_envs), len(self.agents), self.obs_dim])
            if self.turns:
                out["reset_acting"] = wire.encode(acting, [len(reset_envs), len(self.agents)], "uint8")
        step_envs = msg.get("step_envs") or []
        if step_envs:
            out["step"] = self._step(step_envs, msg.get("actions"))
        return out

    def close(self):
        for i, env in enumerate(self.envs):
            try:
                env.close()
            except Exception:
                print(f"distrl envhost: env {i}: close failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        self.envs = []
        return {}

    # -- helpers ---------------------------------------------------------

    def _env(self, i):
        if not isinstance(i, int) or not 0 <= i < len(self.envs):
            raise HostError("bad_request", f"no env {i!r} (have {len(self.envs)})")
        return self.envs[i]

    @staticmethod
    def _call(i, what, fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            raise HostError("env_error", f"env {i}: {what}: {type(e).__name__}: {e}", traceback.format_exc())

    def _actions(self, step_envs, actions):
        values, shape, dtype = wire.decode(actions)
        k, a = len(step_envs), len(self.agents)
        kind = self.action["kind"]
        if kind == "Discrete":
            if shape != [k, a] or dtype not in ("int64", "int32"):
                raise HostError("bad_request", f"discrete actions {dtype}{shape}, want int64[{k}, {a}]")
            start = self.action.get("start", 0)
            return [[int(v) + start for v in values[e * a:(e + 1) * a]] for e in range(k)]
        if kind == "Box":
            shp = self.action["shape"]
            d = _space_size(self.action)
            if shape != [k, a, d] or dtype != "float32":
                raise HostError("bad_request", f"box actions {dtype}{shape}, want float32[{k}, {a}, {d}]")
            rows = []
            for e in range(k):
                row = []
                for g in range(a):
                    v = values[(e * a + g) * d:(e * a + g + 1) * d]
                    row.append(np.asarray(v, dtype=np.float32).reshape(shp) if np is not None else _reshape(v, shp))
                rows.append(row)
            return rows
        raise HostError("unsupported_space", f"action space {kind} cannot be stepped")

    def _step(self, step_envs, actions):
        acts = self._actions(step_envs, actions)
        k, a = len(step_envs), len(self.agents)
        envs = [self._env(i) for i in step_envs]
        obs = ObsBuffer(k * a, self.obs_dim)
        rew, term, trunc, acting = [], [], [], []
        infos = {}
        single = isinstance(envs[0], SingleAgent)
        for e, i in enumerate(step_envs):
            if single:
                # The adapter's lists of one, inlined: this loop is the
                # host's cost per environment step.
                try:
                    res = envs[e].env.step(acts[e][0])
                except Exception as err:
                    raise HostError("env_error", f"env {i}: step: {type(err).__name__}: {err}", traceback.format_exc())
                if type(res) is not tuple or len(res) != 5:
                    raise HostError("env_error", f"env {i}: step must return (obs, reward, terminated, truncated, info)")
                o, r, te, tr, info = res
                obs.add(i, o)
                rew.append(r)
                term.append(1 if te else 0)
                trunc.append(1 if tr else 0)
                if info:
                    got = {}
                    _numeric_info(info, got)
                    for key, vs in got.items():
                        infos.setdefault(key, [math.nan] * k)[e] = vs[0]
                continue
            o, r, te, tr, info = self._call(i, "step", envs[e].step, acts[e])
            for x in o:
                obs.add(i, x)
            rew.extend(r)
            term.extend(1 if x else 0 for x in te)
            trunc.extend(1 if x else 0 for x in tr)
            if self.turns:
                # An ended episode's next step is a reset: its row names
                # every agent, without asking the environment.
                ended = any(te) or any(tr)
                acting.extend([1] * a if ended else self._call(i, "acting", envs[e].acting))
            for key, vs in info.items():
                infos.setdefault(key, [math.nan] * k)[e] = sum(vs) / len(vs)
        try:
            rewards = wire.encode(rew, [k, a])
        except (TypeError, ValueError) as err:
            raise HostError("env_error", f"a reward is not a number: {err}")
        out = {
            "obs": obs.encode([k, a, self.obs_dim]),
            "rewards": rewards,
            "terminated": wire.encode(term, [k, a], "uint8"),
            "truncated": wire.encode(trunc, [k, a], "uint8"),
            "info": {key: wire.encode(vs, [k], "float64") for key, vs in infos.items()},
        }
        if self.turns:
            out["acting"] = wire.encode(acting, [k, a], "uint8")
        return out


def _space_size(desc):
    kind = desc["kind"]
    if kind == "Discrete":
        return 1
    if kind == "MultiDiscrete":
        return len(desc["nvec"])
    if kind == "Box":
        n = 1
        for d in desc["shape"]:
            n *= d
        return n
    return 0


def _reshape(values, shape):
    if len(shape) <= 1:
        return list(values)
    step = len(values) // shape[0]
    return [_reshape(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def serve(address, host=None):
    """Answers requests on a PAIR socket connected to address until the
    close op, or until the parent process is gone."""
    host = host or Host()
    parent = os.getppid()
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.PAIR)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(address)
    sock.send(msgpack.packb({"hello": {"protocol": PROTOCOL, "pid": os.getpid()}}))
    try:
        sock.setsockopt(zmq.RCVTIMEO, PARENT_CHECK_MS)
        while True:
            try:
                raw = sock.recv()
            except zmq.Again:
                if os.getppid() != parent:
                    return  # the actor is gone; nobody will ask again
                continue
            closing = False
            try:
                msg = msgpack.unpackb(raw, raw=False)
                closing = isinstance(msg, dict) and msg.get("op") == "close"
                reply = {"ok": host.handle(msg)}
            except HostError as e:
                if e.tb:
                    print(f"distrl envhost: {e.message}\n{e.tb}", file=sys.stderr, flush=True)
                reply = {"error": {"type": e.type, "message": e.message, "traceback": e.tb}}
            except wire.WireError as e:
                reply = {"error": {"type": "bad_request", "message": str(e), "traceback": ""}}
            except Exception as e:  # a bug here or a malformed message: report, keep serving
                tb = traceback.format_exc()
                print(f"distrl envhost: {tb}", file=sys.stderr, flush=True)
                reply = {"error": {"type": "host_error", "message": f"{type(e).__name__}: {e}", "traceback": tb}}
            sock.send(msgpack.packb(reply, use_bin_type=True))
            if closing:
                return
    finally:
        sock.close()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m distrl.envhost ADDRESS", file=sys.stderr)
        return 2
    serve(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
