"""Notebook 03_vineppo's exercises: 03a VinePPO's step advantage from the outcomes of forked vines
(graded against ``labkit.credit.mc.vineppo`` with the vines' mean as its values); 03b the value
error read off a vine sweep at K = 4 (a ``Reading``, graded against the lab's own run); 03c, the
first half's capstone, a minimal GRPO training loop on the tiny LM (graded against
``labkit.learn.loop.train`` through what two iterations did to a fresh model's parameters).

``reveal_solution("03a")`` / ``("03c")`` print the reference solutions in
labkit/course/solutions/ex03_vineppo.py; ``reveal_solution("03b")`` prints the lab's run.
"""
from __future__ import annotations

import copy

import torch

from labkit.core.credit import Cost
from labkit.course.exercises.cases import rand, randint
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, close, not_finite, register
from labkit.course.exercises.mistakes import looks_like
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import mc
from labkit.envs.arithmetic.lm import ArithmeticLM
from labkit.envs.arithmetic.truth import load_reference


def _reference(vine_outcomes, rewards):
    S, K = vine_outcomes.shape
    r = one_token_rollouts(rewards.to(F64)[None])
    values = vine_outcomes.to(F64).mean(1)[None]
    return mc.vineppo(r, value_fn=lambda rollouts, k: (values, Cost()), k=K).token[0]


def _cases(gen):
    cases = []
    for i in range(6):
        S, K = randint(gen, 2, 6), randint(gen, 2, 9)
        vines = (rand(gen, S, K) < rand(gen, S, 1)).to(F64)
        rewards = torch.zeros(S, dtype=F64)
        rewards[-1] = float(rand(gen, 1) < 0.5)
        if i >= 4:  # intermediate rewards too (a format bonus, a step cost)
            rewards[:-1] = torch.round(0.2 * torch.randn(S - 1, generator=gen, dtype=F64), decimals=1)
        cases.append(Case(f"random #{i}", dict(vine_outcomes=vines, rewards=rewards)))
    cases += [
        Case("step rewards", dict(vine_outcomes=torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]], dtype=F64),
                                  rewards=torch.tensor([-0.1, 0.2, 1.0], dtype=F64))),
        # the edges, graded once the cases above pass
        Case("one step", dict(vine_outcomes=torch.tensor([[1.0, 0.0, 1.0]], dtype=F64), rewards=torch.tensor([1.0], dtype=F64)),
             frozenset({"one_step"})),
        Case("K = 1 vine", dict(vine_outcomes=torch.tensor([[1.0], [0.0], [1.0]], dtype=F64),
                                rewards=torch.tensor([0.0, 0.0, 1.0], dtype=F64)), frozenset({"one_vine"})),
        Case("every vine fails", dict(vine_outcomes=torch.zeros(3, 4, dtype=F64), rewards=torch.tensor([0.0, 0.0, 0.0], dtype=F64)),
             frozenset({"all_fail"})),
    ]
    return cases


def _variant(how):
    def variant(vine_outcomes, rewards):
        v = vine_outcomes.to(F64).sum(1) if how == "sum" else vine_outcomes.to(F64).mean(1)
        r = rewards.to(F64)
        v_next = torch.cat([v[1:], v.new_zeros(1)])
        if how == "sum":
            return r + v_next - v
        if how == "flip":
            return r + v - v_next
        if how == "no_reward":
            return v_next - v
        raise ValueError(f"how: unknown mistake {how!r}")
    return variant


def _last_broken(case, got, want):
    v = case.args["vine_outcomes"].to(F64).mean(1)
    return abs(float(got[-1]) - (float(case.args["rewards"][-1]) - float(v[-1]))) > 1e-5


EXERCISE = register(Exercise(
    notebook="03", name="vineppo_advantage", title="VinePPO step advantage",
    signature="vineppo_advantage(vine_outcomes, rewards) -> tensor (S,)",
    prompt=(
        "Write VinePPO's step advantage from vine values (Kazemnejad et al. 2024, arXiv 2410.01679).\n"
        "  vine_outcomes: (S, K) float tensor; row i holds the outcomes (0/1) of K continuations\n"
        "                 ('vines') sampled from the prefix that ends just before step i\n"
        "  rewards: (S,) float tensor, the reward received inside each step (the outcome on the last)\n"
        "Return the (S,) step advantages (gamma = 1):\n"
        "  V_i = mean of row i,   A_i = r_i + V_{i+1} - V_i,   V_S = 0 after the final step"),
    cases=_cases, reference=_reference,
    rules=(
        Rule("V_i is the MEAN outcome of the K vines, not their sum", looks_like(_variant("sum")), every=True),
        Rule("the advantage is what the step added: r_i + V_{i+1} - V_i (after minus before), not before minus after",
             looks_like(_variant("flip")), every=True),
        Rule("add the reward received inside the step: A_i = r_i + V_{i+1} - V_i",
             looks_like(_variant("no_reward")), every=True),
        Rule("you bootstrapped past the end of the trajectory: after the final step V = 0, so the last "
             "step's advantage is r - V_last", _last_broken),
    ),
))


# --------------------------------------------------------------------------- 03b: read the value error at K = 4
def vine_error_at_k4():
    """03b, the lab's run: VinePPO's values with K = 4 vines per step (vines seeded 0 + 4, as
    notebook 03 seeds them) at every step start of the 32 reference rollouts, against the
    256-vine truth. Returns their mean absolute error (the sweep's ``value_mae``)."""
    env = ArithmeticLM.load()
    ref, _ = load_reference(env)
    credit = mc.vineppo(ref, value_fn=env.value_fn(seed=0 + 4), k=4)
    present = ref.view(ref.rewards, "step", "sum")[1]   # the (rollout, step) cells that exist
    error = (credit.info["step_values"] - ref.truth["step_values"])[present]
    return float(error.abs().mean())


_VINES: dict = {}


def _vine_values(k):
    """(values, truth) at every step start of the reference rollouts with k vines seeded 0 + k,
    computed once per k (a misreading's run; ``vine_error_at_k4`` stays the plain code a reader
    would write)."""
    if k not in _VINES:
        if "env" not in _VINES:
            _VINES["env"] = ArithmeticLM.load()
            _VINES["ref"] = load_reference(_VINES["env"])[0]
        env, ref = _VINES["env"], _VINES["ref"]
        credit = mc.vineppo(ref, value_fn=env.value_fn(seed=0 + k), k=k)
        present = ref.view(ref.rewards, "step", "sum")[1]
        _VINES[k] = credit.info["step_values"][present], ref.truth["step_values"][present]
    return _VINES[k]


def _vine_error(k, column="value_mae"):
    """The same run at another K (vines seeded 0 + k), or another column of the sweep's row: what
    a misreading reads."""
    def other():
        est, truth = _vine_values(k)
        if column == "value_rmse":
            return float((est - truth).pow(2).mean().sqrt())
        if column == "value_corr":
            return float(torch.corrcoef(torch.stack([est.to(F64), truth.to(F64)]))[0, 1])
        return float((est - truth).abs().mean())
    return other


READING = register(Reading(
    notebook="03", letter="b", name="vine_error_k4", title="The value error at K = 4",
    prompt=(
        "Notebook 03's sweep measures VinePPO's values (Kazemnejad et al. 2024, arXiv 2410.01679) at "
        "K = 1, 3, 9 and 16 vines per step. Run it at K = 4: vines seeded 0 + 4 (the notebook's seeds), "
        "on the 32 reference rollouts, scored against the 256-vine truth at every step start "
        "(lesson.vine_value_error(env, ref, ks=[4], seed=0)).\n"
        "Read the mean absolute error of the values (the value_mae column), within 0.002."),
    measure=vine_error_at_k4, tolerance=0.002,
    hint=("that is not the mean |V error| at K = 4: run the sweep with ks=[4] and seed=0, and read the "
          "value_mae column"),
    misreadings=(
        Misreading(_vine_error(3), "that is the error at K = 3, the slider's starting value: run the sweep at K = 4"),
        Misreading(_vine_error(4, "value_rmse"), "that is the root-mean-square error (value_rmse): read the mean "
                   "absolute error, value_mae"),
        Misreading(_vine_error(4, "value_corr"), "that is the correlation with the truth (value_corr): read the "
                   "mean absolute error, value_mae"),
    ),
))


# --------------------------------------------------------------------------- 03c: a GRPO training loop (capstone)
#: the graded runs: SGD at this learning rate (its step is the gradient itself, so any change to
#: the loss shows in the parameters; larger ones wreck the model within two steps)
CAPSTONE_LR = 0.01
#: numbers summarising how a loop moved the parameters: (theta_after - theta_before) / lr projected
#: on this many fixed random directions
FINGERPRINT = 6
_BASE: dict = {}


def _base():
    """The shipped model in float64 (the loop's log-probabilities are float32 either way; float64
    parameters make two correct loops agree to round-off), the training pool (64 three-operand
    problems) and one held-out problem (the lab's loop evaluates at its start and end), loaded once."""
    if not _BASE:
        from labkit.envs.arithmetic.learner import LMLearner

        env = ArithmeticLM.load()
        _BASE.update(env=env, learner=LMLearner, model=env.model.double().eval(),
                     pool=env.task.sample_prompts(64, 3, split="train", seed=1),
                     held_out=env.task.sample_prompts(1, 3, split="held_out", seed=2, unique=True))
    return _BASE


_BATCHES: dict = {}


def _state(model) -> str:
    """A digest of the model's parameters, bit for bit."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    return digest.hexdigest()


def _learner(case_args):
    """A fresh learner for a case: a copy of the float64 model, ``prompts`` problems of the pool
    per batch and ``samples`` completions of each. Its ``collect`` samples a batch once per
    (settings, seed, exact parameters) and hands out copies: the lab's loop and a correct one
    sample the same batches from the same model, and sampling is most of a graded run's time."""
    base = _base()

    class GradedLearner(base["learner"]):
        def collect(self, iteration, seed):
            key = (self.prompts_per_batch, self.n_per_prompt, iteration, seed, _state(self.env.model))
            if key not in _BATCHES:
                if len(_BATCHES) > 256:
                    _BATCHES.clear()
                _BATCHES[key] = super().collect(iteration, seed)
            return copy.deepcopy(_BATCHES[key])

    env = ArithmeticLM(copy.deepcopy(base["model"]), base["env"].tokenizer, base["env"].task)
    return GradedLearner(env, base["pool"], base["held_out"], prompts_per_batch=case_args["prompts"],
                         n_per_prompt=case_args["samples"])


def _flat(learner):
    return torch.cat([p.detach().flatten().to(F64) for p in learner.parameters()])


def _projection(d):
    if "projection" not in _BASE:
        _BASE["projection"] = torch.randn(d, FINGERPRINT, generator=torch.Generator().manual_seed(0), dtype=F64)
    return _BASE["projection"]


def _graded(rewards, before, learner, lr):
    """What is graded: the mean batch rewards, then (theta_after - theta_before) / lr projected."""
    moved = (_flat(learner) - before) / lr
    return torch.cat([torch.as_tensor(rewards, dtype=F64).flatten(), moved @ _projection(len(moved))])


def _call(fn, args):
    """Run the reader's loop on a fresh learner with plain SGD; grade its rewards and how it moved
    the parameters."""
    learner = _learner(args)
    before = _flat(learner)
    optimizer = torch.optim.SGD(learner.parameters(), lr=args["lr"])
    try:
        rewards = fn(learner, optimizer, args["iterations"], args["seed"])
    except Exception:
        # NaN parameters break the next batch's sampling: what is wrong is the NaN, shown as such
        if not bool(torch.isfinite(_flat(learner)).all()):
            return torch.full((args["iterations"] + FINGERPRINT,), float("nan"), dtype=F64)
        raise
    if rewards is None:  # the grader's own words would name the graded vector's length, not the loop's
        raise ValueError(f"your loop should return a tensor (or list) of {args['iterations']} numbers, the mean "
                         f"reward of each iteration's batch; it returned None")
    try:
        rewards = torch.as_tensor([float(r) for r in rewards], dtype=F64)
    except (TypeError, ValueError):
        raise ValueError(f"return a list of {args['iterations']} numbers, the mean reward of each iteration's "
                         f"batch; got {type(rewards).__name__}") from None
    if len(rewards) != args["iterations"]:
        raise ValueError(f"return one mean reward per iteration: {args['iterations']} numbers, got {len(rewards)}")
    return _graded(rewards, before, learner, args["lr"])


_RUNS: dict = {}


def _key(args):
    return tuple(sorted(args.items()))


def _capstone_reference(**args):
    """The lab's loop (``labkit.learn.loop.train``) with the recipe the prompt states, memoised per case."""
    if ("lab", _key(args)) not in _RUNS:
        from labkit.learn.loop import train

        learner = _learner(args)
        before = _flat(learner)
        curve = train(learner, "grpo", kind="grpo", iterations=args["iterations"], lr=args["lr"], epochs=1,
                      minibatches=1, max_grad_norm=None, optimizer="sgd", eval_every=args["iterations"],
                      seed=args["seed"], progress=False)
        _RUNS["lab", _key(args)] = _graded(curve.train_reward[1:].tolist(), before, learner, args["lr"])
    return _RUNS["lab", _key(args)].clone()


def _mistaken_loop(how):
    """A GRPO loop with one typical mistake ``how`` made on purpose (what a rule compares with)."""
    def loop(learner, optimizer, iterations, seed):
        rewards = []
        for i in range(1, iterations + 1):
            batch = learner.collect(i, seed=seed if how == "same_seed" else seed * 1_000_003 + i)
            scores, groups = batch.scores.to(F64), batch.group_ids
            adv = torch.zeros_like(scores)
            for g in torch.unique(groups):
                members = groups == g
                s = scores[members] if how != "batch_mean" else scores
                if how != "batch_mean" and len(s) == 1:
                    mean, std = 0.0, 1.0
                else:
                    mean, std = s.mean(), s.std(unbiased=how != "biased_std")
                adv[members] = (scores[members] - mean) / (std + 1e-6)
            logp = learner.logprobs(batch, torch.arange(len(batch)))
            mask = batch.mask.to(logp.dtype)
            terms = adv[:, None] * logp * mask
            if how == "token_sum":
                loss = -terms.sum(1).mean()
            elif how == "token_mean":
                loss = -terms.sum() / mask.sum()
            else:
                loss = -(terms.sum(1) / mask.sum(1)).mean()
            if how == "flipped":
                loss = -loss
            if how != "no_zero_grad":
                optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rewards.append(float(batch.scores.mean()))
        return rewards
    return loop


def _like(how):
    """A rule test: the answer is wrong and equals the loop with mistake ``how`` (memoised per case)."""
    def broken(case, got, want):
        if close(got, want, CAPSTONE_TOL):
            return False
        if (how, _key(case.args)) not in _RUNS:
            _RUNS[how, _key(case.args)] = _call(_mistaken_loop(how), dict(case.args))
        alt = _RUNS[how, _key(case.args)]
        return alt.shape == got.shape and close(got, alt, CAPSTONE_TOL)
    return broken


def _params_unmoved(case, got, want):
    n = case.args["iterations"]
    return bool(want[n:].abs().max() > 1e-9) and bool(got[n:].abs().max() <= 1e-9)


def _rewards_only_wrong(case, got, want):
    n = case.args["iterations"]
    return close(got[n:], want[n:], CAPSTONE_TOL) and not close(got[:n], want[:n], CAPSTONE_TOL)


def _batches_differ(case, got, want):
    n = case.args["iterations"]
    return not close(got[:n], want[:n], CAPSTONE_TOL)


#: two correct loops agree to about 1e-7 here (float64 parameters; the lab's loop multiplies by a
#: ratio pi / pi_old that float32 log-probabilities leave 1e-7 away from 1); every named mistake
#: moves the graded numbers by 0.01 or more
CAPSTONE_TOL = 1e-5


def _capstone_cases(gen):
    common = dict(iterations=2, lr=CAPSTONE_LR)
    return [
        Case("random #0", dict(seed=randint(gen, 0, 999_999), prompts=2, samples=4, **common)),
        # in both iterations a group whose four answers agree (std 0) beside a split one, answers
        # of different lengths: every named mistake changes what this case's run does
        Case("seed 10", dict(seed=10, prompts=2, samples=4, **common)),
        # the edge, graded once the cases above pass
        Case("groups of one", dict(seed=3, prompts=4, samples=1, **common), frozenset({"group_of_one"})),
    ]


CAPSTONE = register(Exercise(
    notebook="03", letter="c", kind="capstone", path="deep dive", name="grpo_loop", title="A GRPO training loop",
    signature="grpo_loop(learner, optimizer, iterations, seed) -> list of floats (iterations,)",
    prompt=(
        "Write a minimal GRPO training loop (Shao et al. 2024, arXiv 2402.03300) that trains the tiny LM.\n"
        "For each iteration i = 1, ..., iterations:\n"
        "  1. batch = learner.collect(i, seed=seed * 1_000_003 + i)   (a new batch each iteration, seeded "
        "as the lab's train() seeds it)\n"
        "  2. the GRPO advantage of each sequence from batch.scores (B,) and batch.group_ids (B,), exercise "
        "01a's rule: A_b = (s_b - mean of its group) / (std of its group + 1e-6), std unbiased, a group of "
        "one: mean 0, std 1\n"
        "  3. logp = learner.logprobs(batch, torch.arange(B)), the (B, T) log-probabilities of the "
        "sampled tokens (differentiable); batch.mask (B, T) marks the generated ones\n"
        "  4. loss = -(1/B) sum_b (1/L_b) sum_t A_b logp_bt over the L_b generated tokens of sequence b "
        "(a mean within each sequence, then over sequences; one update per batch, so PPO's ratio is 1 "
        "and the clipped surrogate reduces to this)\n"
        "  5. optimizer.zero_grad(), loss.backward(), optimizer.step()\n"
        "Return the list of each iteration's mean batch reward, float(batch.scores.mean()).\n"
        "check builds a small fresh learner per case (2 three-operand prompts x 4 samples, or groups of one; a "
        "float64 copy of the model), "
        "hands your loop plain SGD at lr 0.01, runs 2 iterations and compares the rewards you return and "
        "how far your loop moved the parameters ((after - before) / lr on 6 fixed random directions) with "
        "the lab's labkit.learn.loop.train(learner, 'grpo', kind='grpo', epochs=1, minibatches=1, "
        "max_grad_norm=None, optimizer='sgd'), within 1e-5."),
    cases=_capstone_cases, reference=_capstone_reference, call=_call, tolerance=CAPSTONE_TOL,
    rules=(
        Rule("a group of one (n_per_prompt = 1) has no spread: GRPO gives it mean 0 and std 1 (exercise 01a's "
             "rule), so its advantage is its raw score / (1 + 1e-6); torch.std of one value is NaN",
             lambda case, got, want: not close(got, want, CAPSTONE_TOL), frozenset({"group_of_one"})),
        Rule("the parameters did not move: after loss.backward(), call optimizer.step() every iteration",
             _params_unmoved, every=True),
        Rule("every iteration sampled the same batch: iteration i samples learner.collect(i, seed=seed * "
             "1_000_003 + i), a new seed each time", _like("same_seed"), every=True),
        Rule("the model trained as the lab's did, but the list you return is not each iteration's mean batch "
             "reward, float(batch.scores.mean())", _rewards_only_wrong, every=True),
        Rule("your update climbed the loss instead of descending it: the loss is MINUS the mean of A * logp "
             "(minimising it raises the log-probability of tokens with A > 0)", _like("flipped"), every=True),
        Rule("the gradients accumulated across iterations: PyTorch adds each backward's gradient to .grad, so "
             "call optimizer.zero_grad() before loss.backward()", _like("no_zero_grad"), every=True),
        Rule("you normalised over the whole batch: GRPO compares each score with its own group's mean and std "
             "(the completions of the same prompt, batch.group_ids)", _like("batch_mean"), every=True),
        Rule("the std is the unbiased one (divide by n - 1, torch.std's default), as in exercise 01a",
             _like("biased_std"), every=True),
        Rule("you summed over each sequence's tokens: GRPO takes the MEAN over a sequence's generated tokens "
             "(divide by its number of tokens L_b), then the mean over sequences", _like("token_sum"), every=True),
        Rule("you averaged over all tokens of the batch at once (a long sequence then weighs more): GRPO "
             "averages within each sequence first, then over sequences", _like("token_mean"), every=True),
        Rule("a group whose answers all score the same has std 0: divide by (std + 1e-6), so its advantage "
             "is 0, not NaN", not_finite),
        Rule("your batches are not the lab's: iteration i (counting from 1) samples learner.collect(i, "
             "seed=seed * 1_000_003 + i) and reports float(batch.scores.mean())", _batches_differ),
    ),
))
