"""TeamTask: a cooperative multi-agent task whose coalition values v(S) are exact.

The story. A team of 3-6 agents solves a task of one of ``n_types`` hidden types ("A", "B", ...).
Each agent acts once, in the order of ``roles``; one position of the Rollouts is one agent's
action. The roles (each a tabular softmax policy over its own few actions, conditioned on what
it observes)::

    role        observes             actions                  null action when absent
    planner     the task type        plan A, plan B, ...      no plan
    solver      the planner's plan   method A, method B, ...  no draft
                ("no plan" if none)
    checker     nothing ("drafts")   approve, review          approve (no review)
    free_rider  nothing              idle, agree, chat        idle
    saboteur    nothing              cooperate, sabotage      cooperate

What happens (task type k, plan m, solver i's method j_i):

* solver i writes a correct draft with probability
  q_i = p_plan if j_i == k and a plan m == j_i is present; p_alone if j_i == k otherwise; 0 if
  j_i != k (the wrong method never works). Drafts are independent given the actions.
* the team submits a correct draft if any solver wrote one (an automatic test picks it).
* the answer passes the final gate for sure if a checker reviewed it, otherwise with probability
  ``unchecked_pass`` (an unreviewed answer may have a formatting or integration slip).
* each saboteur that sabotages breaks the answer with probability ``sabotage``; a reviewing
  checker catches and undoes each break with probability ``catch``.
* team reward = 1 if a correct draft was submitted, passed the gate and is intact, else 0.

So P(success | k, actions) = (1 - prod_i (1 - q_i)) * gate * prod_s (1 - sabotage * (1 - catch *
reviewed)) with gate = 1 if reviewed else unchecked_pass. A free rider's action never enters.

Coalition values. v(S) is the team's success probability when the agents outside S are absent:
their action is replaced by the null action of the table above (absent planner: no plan; absent
solver: no draft; absent checker: no review; absent saboteur: no sabotage), while the agents in S
keep the action they actually took and chance is integrated out (closed form above, an exact
sum over the independent chance outcomes). Held-fixed actions are the C3 / SHARP convention: the
counterfactual removes one agent's contribution, it does not let the others re-decide.

* per trajectory: ``coalition_values(rollouts)`` (B, 2**n), column = bitmask, bit i = agent i;
  column 0 = empty team (always 0), last column = full team;
* per policy: ``truth(policies).values`` (2**n,) = E over task types and the policies' joint
  actions of the per-trajectory values, by enumerating every (type, joint action) — so the
  Shapley value of the expected game is the expected per-trajectory Shapley value (linearity);
  ``truth(policies).J`` = v(N), the exact team success, with its exact gradient per agent.

What a mixer may read instead (no coalition values): ``global_states(rollouts)``, each episode's
task type, every agent's observation and action by name, and the team outcome.

Presets (``TeamTask.preset(name)``) isolate one phenomenon each, with p_plan = 1 so the games are
the textbook ones for a team that acts right: "redundancy" (planner + two solvers, either solver
suffices: the glove game), "complementarity" (planner + solver + checker, all three needed),
"free_riding" (planner + solver + an agent whose action never matters), "sabotage"
(planner + solver + saboteur); "mixed" is the default six-role team with noisy parameters.

Rewards. ``reward="shared"``: every agent's reward is the team reward (on its one position).
``reward="heterogeneous"``: agent i gets offset_i + scale_i * (team + process_i) / 2 with a
role-specific process score (planner: its plan names the true type; solver: its own draft is
correct; other roles: the team reward) and role-specific (scale, offset) from ``reward_profile``
(default: planner (1, 0), solver (10, 5), checker (0.1, -1), free rider (1, 0), saboteur (1, 0)).
Different scales and offsets per role are the Dr. MAS setting (arXiv 2602.08847): one baseline
and one standard deviation pooled over all agents fit none of them.
"""
from __future__ import annotations

import inspect
from typing import Mapping, Sequence

import torch

from labkit.core.checks import as_tensor, check_choice, check_int, check_number, check_policy, check_shape
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.envs.teamtask.truth import TeamTruth, enumerate_truth

ROLES = ("planner", "solver", "checker", "free_rider", "saboteur")
TYPE_NAMES = "ABCD"
REWARD_MODES = ("shared", "heterogeneous")
APPROVE, REVIEW = 0, 1
COOPERATE, SABOTAGE = 0, 1
DEFAULT_REWARD_PROFILE = {"planner": (1.0, 0.0), "solver": (10.0, 5.0), "checker": (0.1, -1.0),
                          "free_rider": (1.0, 0.0), "saboteur": (1.0, 0.0)}

PRESETS: dict[str, dict] = {
    "redundancy": dict(roles=("planner", "solver", "solver"), p_plan=1.0, p_alone=0.0, unchecked_pass=1.0),
    "complementarity": dict(roles=("planner", "solver", "checker"), p_plan=1.0, p_alone=0.0, unchecked_pass=0.0),
    "free_riding": dict(roles=("planner", "solver", "free_rider"), p_plan=1.0, p_alone=0.0, unchecked_pass=1.0),
    "sabotage": dict(roles=("planner", "solver", "saboteur"), p_plan=1.0, p_alone=0.0, unchecked_pass=1.0,
                     sabotage=0.5),
    "mixed": dict(roles=("planner", "solver", "solver", "checker", "free_rider", "saboteur")),
}
PRESET_STORIES = {
    "redundancy": "either solver suffices once there is a plan (the glove game)",
    "complementarity": "planner, solver and checker are all needed",
    "free_riding": "the free rider's action never changes the outcome",
    "sabotage": "the saboteur breaks the answer half the time",
    "mixed": "all five roles, noisy drafts and gate",
}


class TeamTask:
    """See the module docstring. Sampling is seeded; all exact quantities are float64."""

    MIN_AGENTS, MAX_AGENTS = 3, 6
    MAX_TYPES = len(TYPE_NAMES)

    def __init__(self, roles: Sequence[str] = PRESETS["mixed"]["roles"], *, n_types: int = 2,
                 p_plan: float = 0.9, p_alone: float = 0.3, unchecked_pass: float = 0.6,
                 sabotage: float = 0.5, catch: float = 0.8, reward: str = "shared",
                 reward_profile: Mapping[str, tuple[float, float]] | None = None):
        if isinstance(roles, str) or not isinstance(roles, Sequence):
            raise TypeError(f"roles: expected a sequence of role names, got {roles!r}")
        roles = tuple(roles)
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise ValueError(f"roles: unknown role(s) {bad}; known roles: {ROLES}")
        if not self.MIN_AGENTS <= len(roles) <= self.MAX_AGENTS:
            raise ValueError(f"roles: a team has {self.MIN_AGENTS} to {self.MAX_AGENTS} agents, got {len(roles)}")
        if "solver" not in roles:
            raise ValueError(f"roles: the team needs at least one solver (nobody else writes a draft), got {roles}")
        if roles.count("planner") > 1 or ("planner" in roles and roles[0] != "planner"):
            raise ValueError(f"roles: at most one planner, and it must act first (solvers read its plan), got {roles}")
        if roles.count("checker") > 1:
            raise ValueError(f"roles: at most one checker (it is the team's single final review), got {roles}")
        self.roles = roles
        self.n_types = check_int("n_types", n_types, low=1, high=self.MAX_TYPES)
        self.p_plan = check_number("p_plan", p_plan, low=0.0, high=1.0)
        self.p_alone = check_number("p_alone", p_alone, low=0.0, high=1.0)
        self.unchecked_pass = check_number("unchecked_pass", unchecked_pass, low=0.0, high=1.0)
        self.sabotage = check_number("sabotage", sabotage, low=0.0, high=1.0)
        self.catch = check_number("catch", catch, low=0.0, high=1.0)
        self.reward = check_choice("reward", reward, REWARD_MODES)
        profile = dict(DEFAULT_REWARD_PROFILE)
        if reward_profile is not None and not isinstance(reward_profile, Mapping):
            raise TypeError(f"reward_profile: expected a dict role -> (scale, offset), e.g. "
                            f"{{'solver': (10.0, 5.0)}}, got {reward_profile!r}")
        for role, pair in dict(reward_profile or {}).items():
            if role not in ROLES:
                raise ValueError(f"reward_profile: unknown role {role!r}; known roles: {ROLES}")
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"reward_profile: {role!r} needs a (scale, offset) pair, got {pair!r}")
            profile[role] = (check_number(f"reward_profile[{role!r}] scale", pair[0], low=0.0),
                             check_number(f"reward_profile[{role!r}] offset", pair[1]))
        self.reward_profile = profile

        self.types = tuple(TYPE_NAMES[:self.n_types])
        self.planner = roles.index("planner") if "planner" in roles else None
        self.solvers = tuple(i for i, r in enumerate(roles) if r == "solver")
        self.checker = roles.index("checker") if "checker" in roles else None
        self.saboteurs = tuple(i for i, r in enumerate(roles) if r == "saboteur")
        self.agent_names = self._names(roles)
        K = self.types
        self.action_names = [self._role_actions(r, K) for r in roles]
        self.obs_names = [self._role_obs(r, K) for r in roles]

    # ---- construction helpers
    @classmethod
    def preset(cls, name: str, **overrides) -> "TeamTask":
        """A team from ``PRESETS[name]`` ("redundancy", "complementarity", "free_riding",
        "sabotage", "mixed"), with any constructor argument overridden."""
        check_choice("name", name, tuple(PRESETS))
        known = tuple(inspect.signature(cls.__init__).parameters)[1:]
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise TypeError(f"overrides: unknown TeamTask argument(s) {unknown}; the constructor takes {known}")
        return cls(**{**PRESETS[name], **overrides})

    @staticmethod
    def _names(roles) -> list[str]:
        counts = {r: roles.count(r) for r in roles}
        seen: dict[str, int] = {}
        out = []
        for r in roles:
            seen[r] = seen.get(r, 0) + 1
            label = r.replace("_", " ")
            out.append(f"{label} {seen[r]}" if counts[r] > 1 else label)
        return out

    @staticmethod
    def _role_actions(role: str, types) -> list[str]:
        return {"planner": [f"plan {t}" for t in types], "solver": [f"method {t}" for t in types],
                "checker": ["approve", "review"], "free_rider": ["idle", "agree", "chat"],
                "saboteur": ["cooperate", "sabotage"]}[role]

    @staticmethod
    def _role_obs(role: str, types) -> list[str]:
        return {"planner": [f"task {t}" for t in types], "solver": ["no plan"] + [f"plan {t}" for t in types],
                "checker": ["drafts ready"], "free_rider": ["team at work"], "saboteur": ["team at work"]}[role]

    def __repr__(self) -> str:
        return (f"TeamTask(roles={self.roles}, n_types={self.n_types}, p_plan={self.p_plan}, "
                f"p_alone={self.p_alone}, unchecked_pass={self.unchecked_pass}, sabotage={self.sabotage}, "
                f"catch={self.catch}, reward={self.reward!r})")

    @property
    def n_agents(self) -> int:
        return len(self.roles)

    @property
    def n_coalitions(self) -> int:
        return 2 ** self.n_agents

    # ---- policies
    def make_policies(self, *, init_std: float = 0.0, seed: int = 0) -> list:
        """One TabularSoftmaxPolicy per agent, shape (n_obs_i, n_actions_i); uniform by default."""
        from labkit.policies import TabularSoftmaxPolicy
        seed = check_int("seed", seed)
        return [TabularSoftmaxPolicy(len(o), len(a), init_std=init_std, seed=seed + i)
                for i, (o, a) in enumerate(zip(self.obs_names, self.action_names))]

    def scripted_policies(self, strength: float = 4.0, *, saboteur: float | None = None) -> list:
        """A competent team: each agent's designed action gets logit ``strength``, the others 0.

        planner: plan = the task type; solver: method = the plan (uniform without a plan);
        checker: review; free rider: uniform; saboteur: sabotage with logit ``saboteur``
        (default ``strength``: a determined saboteur; a negative value makes it cooperate).
        """
        strength = check_number("strength", strength)
        saboteur = strength if saboteur is None else check_number("saboteur", saboteur)
        policies = self.make_policies()
        with torch.no_grad():
            for i, (role, pol) in enumerate(zip(self.roles, policies)):
                if role == "planner":
                    pol.logits[torch.arange(self.n_types), torch.arange(self.n_types)] = strength
                elif role == "solver":
                    pol.logits[1 + torch.arange(self.n_types), torch.arange(self.n_types)] = strength
                elif role == "checker":
                    pol.logits[0, REVIEW] = strength
                elif role == "saboteur":
                    pol.logits[0, SABOTAGE] = saboteur
        return policies

    def _check_policies(self, policies) -> list:
        if isinstance(policies, torch.nn.Module) or not isinstance(policies, Sequence):
            raise TypeError("policies: expected a list with one tabular policy per agent (see make_policies)")
        if len(policies) != self.n_agents:
            raise ValueError(f"policies: expected {self.n_agents} (one per agent), got {len(policies)}")
        for i, pol in enumerate(policies):
            check_policy(f"policies[{i}]", pol)
            shape = tuple(getattr(pol, "logits", torch.empty(0)).shape)
            want = (len(self.obs_names[i]), len(self.action_names[i]))
            if shape != want:
                raise ValueError(f"policies[{i}] ({self.agent_names[i]}): logits have shape {shape}, "
                                 f"this role needs (n_obs, n_actions) = {want}")
        return list(policies)

    # ---- the rules
    def observations(self, task: torch.Tensor, actions: torch.Tensor, agent: int) -> torch.Tensor:
        """What ``agent`` sees given the task types (E,) and the actions of earlier agents."""
        role = self.roles[agent]
        if role == "planner":
            return task
        if role == "solver":
            if self.planner is None:
                return torch.zeros_like(task)
            return actions[:, self.planner] + 1
        return torch.zeros_like(task)

    def success_prob(self, task: torch.Tensor, actions: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """P(team success | task type, actions of the agents present), chance integrated out.

        ``task`` (E,), ``actions`` (E, n) local action ids, ``present`` (M, n) bool: one row per
        coalition. Returns (E, M) float64 (the formula in the module docstring).
        """
        task = as_tensor("task", task).long()
        actions = as_tensor("actions", actions).long()
        present = as_tensor("present", present).bool()
        E, M = task.shape[0], present.shape[0]
        f64 = torch.float64
        if self.planner is not None:
            plan = actions[:, self.planner]
            plan_here = present[:, self.planner][None, :]                         # (1, M)
        fail = torch.ones(E, M, dtype=f64)
        for i in self.solvers:
            j = actions[:, i]
            right = j == task
            q_alone = torch.where(right, self.p_alone, 0.0).to(f64)
            if self.planner is not None:
                q_plan = torch.where(right & (plan == j), self.p_plan, q_alone).to(f64)
                q = torch.where(plan_here, q_plan[:, None], q_alone[:, None])   # (E, M)
            else:
                q = q_alone[:, None].expand(E, M)
            fail = fail * torch.where(present[:, i][None, :], 1.0 - q, 1.0)
        if self.checker is not None:
            reviewed = (actions[:, self.checker] == REVIEW)[:, None] & present[:, self.checker][None, :]
        else:
            reviewed = torch.zeros(E, M, dtype=torch.bool)
        gate = torch.where(reviewed, 1.0, self.unchecked_pass).to(f64)
        intact = torch.ones(E, M, dtype=f64)
        broken_if_sabotage = torch.where(reviewed, self.sabotage * (1.0 - self.catch), self.sabotage).to(f64)
        for s in self.saboteurs:
            sab = (actions[:, s] == SABOTAGE)[:, None] & present[:, s][None, :]
            intact = intact * torch.where(sab, 1.0 - broken_if_sabotage, 1.0)
        return (1.0 - fail) * gate * intact

    def coalition_masks(self) -> torch.Tensor:
        """(2**n, n) bool: row c is coalition c, agent i present iff bit i of c is set."""
        c = torch.arange(self.n_coalitions)
        return (c[:, None] >> torch.arange(self.n_agents)[None, :]) & 1 == 1

    # ---- sampling
    @torch.no_grad()
    def sample(self, policies, n_tasks: int, *, group_size: int = 8, seed: int = 0,
               task_types: Sequence[int] | None = None) -> Rollouts:
        """Play ``group_size`` episodes of the team on each of ``n_tasks`` task instances.

        Task i's type is uniform over ``n_types`` unless ``task_types`` (one per task) is given;
        its episodes are rows i * group_size ... and share ``group_ids`` = i. Position t is agent
        t's action: ``tokens`` = local action id, ``states`` = local observation id,
        ``agent_ids = step_ids = turn_ids = 0 .. n-1``; each agent's reward on its position.

        ``truth``: ``team_reward`` (B,) float64, ``success`` (B,) bool, ``task_type`` (B,),
        ``coalition_values`` (B, 2**n) exact v(S) with the actions held, ``draft_correct``
        (B, n) bool (False for non-solvers), ``action_ok`` (B, n): 1 for a locally right action
        (plan = type, method = type, review, cooperate), 0 for a wrong one, 0.5 for a free rider,
        ``process`` (B, n) the process score of the heterogeneous reward.
        ``info``: ``n_agents``, ``roles``, ``agent_names``, ``reward``, ``env``.
        """
        n_tasks = check_int("n_tasks", n_tasks, low=1)
        group_size = check_int("group_size", group_size, low=1)
        seed = check_int("seed", seed)
        policies = self._check_policies(policies)
        n, K = self.n_agents, self.n_types
        g = torch.Generator().manual_seed(seed)
        if task_types is None:
            types = torch.randint(K, (n_tasks,), generator=g)
        else:
            types = as_tensor("task_types", task_types).long().reshape(-1)
            if types.numel() != n_tasks:
                raise ValueError(f"task_types: expected one type per task ({n_tasks}), got {types.numel()}")
            if bool(((types < 0) | (types >= K)).any()):
                raise ValueError(f"task_types: types must lie in [0, {K - 1}], got {types.tolist()}")
        B = n_tasks * group_size
        task = types.repeat_interleave(group_size)
        group_ids = torch.arange(n_tasks).repeat_interleave(group_size)
        actions = torch.zeros(B, n, dtype=torch.long)
        states = torch.zeros(B, n, dtype=torch.long)
        logprobs = torch.zeros(B, n, dtype=torch.float64)
        entropies = torch.zeros(B, n, dtype=torch.float64)
        for i, pol in enumerate(policies):
            obs = self.observations(task, actions, i)
            a, lp, ent = pol.sample(obs, g)
            actions[:, i], states[:, i] = a, obs
            logprobs[:, i], entropies[:, i] = lp.double(), ent.double()

        outcome = self._chance(task, actions, torch.ones(n, dtype=torch.bool), g)
        draft, passed, reviewed = outcome["draft"], outcome["passed"], outcome["reviewed"]
        broke, caught, success = outcome["broke"], outcome["caught"], outcome["success"]
        team = success.double()

        action_ok, process = self._action_quality(task, actions, draft, team)
        rewards = self._rewards(team, process)
        values = self.success_prob(task, actions, self.coalition_masks())
        ids = torch.arange(n).expand(B, n).clone()
        text = self._texts(actions, draft, broke, caught, passed, reviewed)
        return Rollouts(
            tokens=actions, mask=torch.ones(B, n, dtype=torch.bool), rewards=rewards, group_ids=group_ids,
            step_ids=ids, turn_ids=ids.clone(), agent_ids=ids.clone(), logprobs=logprobs, entropies=entropies,
            states=states, text=text, prompts=[self.prompt(int(t), int(gi)) for t, gi in zip(task, group_ids)],
            truth={"team_reward": team, "success": success, "task_type": task, "coalition_values": values,
                   "draft_correct": draft, "action_ok": action_ok, "process": process},
            info={"n_agents": n, "roles": self.roles, "agent_names": list(self.agent_names),
                  "reward": self.reward, "env": repr(self)},
        )

    def _chance(self, task, actions, present, g) -> dict:
        """Draw the chance outcomes for the given actions with only ``present`` (n,) agents there
        (absent agents play their null action). Returns bool tensors (B,) / (B, n)."""
        B, n = actions.shape
        draft = torch.zeros(B, n, dtype=torch.bool)
        plan_here = self.planner is not None and bool(present[self.planner])
        for i in self.solvers:
            q = self._draft_prob(task, actions, i, plan_here)
            draft[:, i] = bool(present[i]) & (torch.rand(B, generator=g, dtype=torch.float64) < q)
        if self.checker is not None and bool(present[self.checker]):
            reviewed = actions[:, self.checker] == REVIEW
        else:
            reviewed = torch.zeros(B, dtype=torch.bool)
        passed = reviewed | (torch.rand(B, generator=g, dtype=torch.float64) < self.unchecked_pass)
        intact = torch.ones(B, dtype=torch.bool)
        broke = torch.zeros(B, n, dtype=torch.bool)
        caught = torch.zeros(B, n, dtype=torch.bool)
        for s in self.saboteurs:
            hit = bool(present[s]) & (actions[:, s] == SABOTAGE) & (
                torch.rand(B, generator=g, dtype=torch.float64) < self.sabotage)
            undo = reviewed & (torch.rand(B, generator=g, dtype=torch.float64) < self.catch)
            broke[:, s], caught[:, s] = hit & ~undo, hit & undo
            intact &= ~broke[:, s]
        success = draft.any(1) & passed & intact
        return {"draft": draft, "reviewed": reviewed, "passed": passed, "broke": broke, "caught": caught,
                "success": success}

    @torch.no_grad()
    def play(self, task_type, actions, *, present=None, seed: int = 0) -> torch.Tensor:
        """Draw the outcome (team success, (B,) bool) of given joint ``actions`` (B, n) on tasks of
        ``task_type`` (B,), with only the agents in ``present`` (n,) bool (default: everyone);
        absent agents play their null action. A Monte Carlo check of ``success_prob``."""
        task = as_tensor("task_type", task_type).long().reshape(-1)
        actions = as_tensor("actions", actions).long()
        check_shape("actions", actions, (task.shape[0], self.n_agents))
        for i, names in enumerate(self.action_names):
            if bool(((actions[:, i] < 0) | (actions[:, i] >= len(names))).any()):
                raise ValueError(f"actions: column {i} ({self.agent_names[i]}) must lie in [0, {len(names) - 1}]")
        if bool(((task < 0) | (task >= self.n_types)).any()):
            raise ValueError(f"task_type: types must lie in [0, {self.n_types - 1}]")
        present = torch.ones(self.n_agents, dtype=torch.bool) if present is None else as_tensor("present", present).bool()
        check_shape("present", present, (self.n_agents,))
        g = torch.Generator().manual_seed(check_int("seed", seed))
        return self._chance(task, actions, present, g)["success"]

    def _draft_prob(self, task: torch.Tensor, actions: torch.Tensor, i: int, plan_here: bool) -> torch.Tensor:
        """q_i of the module docstring, (B,) float64 (``plan_here``: the planner is present)."""
        j = actions[:, i]
        right = j == task
        q = torch.where(right, self.p_alone, 0.0).to(torch.float64)
        if plan_here:
            q = torch.where(right & (actions[:, self.planner] == j), self.p_plan, q).to(torch.float64)
        return q

    def _action_quality(self, task, actions, draft, team):
        B, n = actions.shape
        ok = torch.full((B, n), 0.5, dtype=torch.float64)
        process = team[:, None].expand(B, n).clone()
        for i, role in enumerate(self.roles):
            if role in ("planner", "solver"):
                ok[:, i] = (actions[:, i] == task).double()
            elif role == "checker":
                ok[:, i] = (actions[:, i] == REVIEW).double()
            elif role == "saboteur":
                ok[:, i] = (actions[:, i] == COOPERATE).double()
            if role == "planner":
                process[:, i] = ok[:, i]
            elif role == "solver":
                process[:, i] = draft[:, i].double()
        return ok, process

    def _rewards(self, team: torch.Tensor, process: torch.Tensor) -> torch.Tensor:
        n = self.n_agents
        if self.reward == "shared":
            return team[:, None].expand(-1, n).clone()
        scale = torch.tensor([self.reward_profile[r][0] for r in self.roles], dtype=torch.float64)
        offset = torch.tensor([self.reward_profile[r][1] for r in self.roles], dtype=torch.float64)
        return offset + scale * (team[:, None] + process) / 2

    def prompt(self, task_type: int, task: int = 0) -> str:
        """The statement of task number ``task`` (>= 0) of type ``task_type`` (0 .. n_types - 1)."""
        task_type = check_int("task_type", task_type, low=0, high=self.n_types - 1)
        task = check_int("task", task, low=0)
        return (f"Task {task} (type {self.types[task_type]}): a team of {self.n_agents} "
                f"({', '.join(self.agent_names)}) must submit a correct, intact answer.")

    def _texts(self, actions, draft, broke, caught, passed, reviewed) -> list[list[str]]:
        """'name: action (what chance did)' per position, built from Python lists (fast)."""
        names, acts, roles = self.agent_names, self.action_names, self.roles
        out = []
        for row, dr, br, ca, ps, rv in zip(actions.tolist(), draft.tolist(), broke.tolist(), caught.tolist(),
                                           passed.tolist(), reviewed.tolist()):
            cells = []
            for i, a in enumerate(row):
                s = f"{names[i]}: {acts[i][a]}"
                if roles[i] == "solver":
                    s += " (draft correct)" if dr[i] else " (draft wrong)"
                elif roles[i] == "saboteur" and a == SABOTAGE:
                    s += " (broke it)" if br[i] else " (caught)" if ca[i] else " (no effect)"
                elif roles[i] == "checker" and not rv:
                    s += " (passed)" if ps else " (slipped)"
                cells.append(s)
            out.append(cells)
        return out

    def transcript(self, rollouts: Rollouts, row: int) -> str:
        """A readable transcript of episode ``row``."""
        check_rollouts(rollouts, "TeamTask.sample")
        row = check_int("row", row, low=0, high=rollouts.batch_size - 1)
        if rollouts.text is None:
            raise ValueError("rollouts.text: this Rollouts carries no texts")
        lines = [rollouts.prompts[row]] if rollouts.prompts is not None else []
        lines += [f"  {rollouts.text[row][t]}" for t in range(rollouts.horizon) if rollouts.mask[row, t]]
        if "team_reward" in rollouts.truth:
            lines.append(f"team reward: {float(rollouts.truth['team_reward'][row]):g}")
        return "\n".join(lines)

    # ---- exact truth
    def _check_rollouts(self, rollouts: Rollouts) -> torch.Tensor:
        check_rollouts(rollouts, "TeamTask.sample")
        task = rollouts.truth.get("task_type")
        if not isinstance(task, torch.Tensor) or task.shape != (rollouts.batch_size,):
            raise ValueError("rollouts.truth['task_type']: missing or mis-shaped; sample with TeamTask.sample")
        if rollouts.horizon != self.n_agents or not bool(rollouts.mask.all()):
            raise ValueError(f"rollouts: expected one position per agent ({self.n_agents}), "
                             f"got horizon {rollouts.horizon}; sample with this TeamTask")
        return task

    def coalition_values(self, rollouts: Rollouts) -> torch.Tensor:
        """Exact v(S) per trajectory, (B, 2**n) float64: the actions taken are held, absent
        agents play their null action, chance is integrated out (see the module docstring)."""
        task = self._check_rollouts(rollouts)
        return self.success_prob(task, rollouts.tokens, self.coalition_masks())

    def global_states(self, rollouts: Rollouts) -> list[dict]:
        """What a centralised critic sees of each episode, one dict per trajectory: ``task`` (the
        type name), ``roles``, ``observations`` and ``actions`` ({agent name: name}, e.g. "plan A",
        "review") and ``team_reward`` (the outcome, 0.0 or 1.0). The state before chance: which
        drafts worked and whether a sabotage broke the answer are not in it (the exact coalition
        values integrate them out)."""
        task = self._check_rollouts(rollouts)
        names, roles = self.agent_names, self.roles
        team = rollouts.truth.get("team_reward")
        if not isinstance(team, torch.Tensor) or team.shape != (rollouts.batch_size,):
            raise ValueError("rollouts.truth['team_reward']: missing or mis-shaped; sample with TeamTask.sample")
        out = []
        for k, obs, act, r in zip(task.tolist(), rollouts.states.tolist(), rollouts.tokens.tolist(), team.tolist()):
            out.append({"task": self.types[k], "roles": dict(zip(names, roles)),
                        "observations": {n: self.obs_names[i][o] for i, (n, o) in enumerate(zip(names, obs))},
                        "actions": {n: self.action_names[i][a] for i, (n, a) in enumerate(zip(names, act))},
                        "team_reward": float(r)})
        return out

    def joint_actions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every (task type, joint action): ``task`` (E,), ``actions`` (E, n), E = K * prod |A_i|."""
        sizes = [self.n_types] + [len(a) for a in self.action_names]
        grids = torch.cartesian_prod(*[torch.arange(s) for s in sizes])
        if grids.dim() == 1:  # cartesian_prod of one tensor returns 1-D
            grids = grids[:, None]
        return grids[:, 0], grids[:, 1:]

    def truth(self, policies) -> TeamTruth:
        """Exact per-policy quantities by enumerating every task type and joint action
        (``truth.enumerate_truth``)."""
        return enumerate_truth(self, self._check_policies(policies))
