"""Engine formulas against hand calculations (the arithmetic is in each test)."""

import math

import numpy as np
import pytest

from ipd_cli.engine import formulas as f


def test_training_flops_llama_405b():
    # 6N = 6 * 405e9 = 2.43e12; attention = 3 * 2 * L * s * d = 6 * 126 * 8192 * 16384 = 1.01468e11
    got = f.training_flops_per_token(405e9, 126, 8192, 128 * 128, 128 * 128)
    assert got == pytest.approx(2.43e12 + 1.01468e11, rel=1e-4)


def test_llama_405b_gpu_hours_by_hand():
    # Llama 3.1 405B, 15.6e12 tokens, H100 BF16 989 TF dense, MFU 0.40:
    # FLOPs = 2.53147e12 * 15.6e12 = 3.9491e25; per GPU 0.40 * 989e12 = 3.956e14 FLOP/s
    # GPU-hours = 3.9491e25 / 3.956e14 / 3600 = 2.7729e7 (Meta disclosed 30.84M incl. goodput losses)
    fpt = f.training_flops_per_token(405e9, 126, 8192, 16384, 16384)
    s = f.seconds_per_token_per_gpu(fpt, 989e12, 0.40, 0.0, 1.0, 0.0)
    gpu_hours = 15.6e12 * s / 3600
    assert gpu_hours == pytest.approx(2.7729e7, rel=1e-3)


def test_scale_efficiency_and_its_inverse():
    alpha = f.scale_exponent(0.85)  # -log10(0.85) = 0.070581
    assert alpha == pytest.approx(0.070581, rel=1e-4)
    assert f.scale_efficiency(5120, 512, alpha) == pytest.approx(0.85)
    assert f.scale_efficiency(100, 512, alpha) == 1.0  # no bonus below the measured size
    # inverse: N * eff(N) = R. At R = 5120 * 0.85 = 4352 GPU-equivalents, N = 5120
    assert f.gpus_for_rate(4352.0, 512, alpha) == pytest.approx(5120, rel=1e-9)
    assert f.gpus_for_rate(300.0, 512, alpha) == 300.0


def test_moe_a2a_bytes():
    # DeepSeek-V3-like: k=8, hidden 7168, 61 layers, 1.5 B/value, EP 8 -> 7/8 leaves the GPU
    # 4 * 8 * 7168 = 229,376; * 61 = 13,991,936; * 1.5 = 20,987,904; * 0.875 = 18,364,416 bytes
    assert f.moe_a2a_bytes_per_token(8, 7168, 61, 1.5, 8) == pytest.approx(18_364_416)
    assert f.moe_a2a_bytes_per_token(8, 7168, 61, 1.5, 1) == 0


def test_exposed_comm_adds_to_compute():
    # compute 1e12 / (1e15 * 0.5) = 2e-3 s; comm 1e9 B / 1e12 B/s = 1e-3 s, half hidden -> 0.5e-3
    assert f.seconds_per_token_per_gpu(1e12, 1e15, 0.5, 1e9, 1e12, 0.5) == pytest.approx(2.5e-3)


def test_memory_bytes():
    # 1e9 params * 16 B + 8192 * 4096 * 32 * 2 B = 1.6e10 + 2.147e9
    assert f.training_memory_bytes(1e9, 16, 8192, 4096, 32, 2) == 1.6e10 + 8192 * 4096 * 32 * 2


def test_tco_per_gpu_hour_by_hand():
    # capex 50,000 per GPU, 10 % over 5 years: CRF = 0.1 / (1 - 1.1^-5) = 0.263797
    crf = f.capital_recovery_factor(0.10, 5)
    assert crf == pytest.approx(0.263797, rel=1e-5)
    # fixed = 50,000 * (0.263797 + 0.06) = 16,189.9 $/yr over 8760 * 0.85 = 7446 h -> 2.17431 $/h
    # energy = 1.8 kW * 1.3 * 0.08 = 0.1872 $/h ; total 2.36151
    got = f.tco_usd_per_gpu_hour(50_000, crf, 0.06, 0.85, 1.8, 1.3, 0.08)
    assert got == pytest.approx(2.36151, rel=1e-4)
    assert f.capital_recovery_factor(0, 4) == 0.25


def test_helpers_work_on_arrays():
    import numpy as np

    a = np.array([1.0, 5.0])
    assert list(f.maximum(a, 3.0)) == [3.0, 5.0]
    assert list(f.minimum(a, 3.0)) == [1.0, 3.0]
    assert list(f.ceil(np.array([1.2, 2.0]))) == [2.0, 2.0]
    assert list(f.scale_efficiency(np.array([256.0, 5120.0]), 512, f.scale_exponent(0.85))) == pytest.approx(
        [1, 0.85]
    )
    assert math.isclose(f.energy_mwh(1000, 2.0, 1.5), 3.0)


def test_ceil_on_arrays_is_the_floor_division_form():
    # np.ceil where an element is finite, floor division where not: -((-x) // 1) by hand,
    # element by element, signed zeros included (ceil(-0.5) = -0.0), and NaN at an infinity (as
    # float("inf") // 1 is NaN for a Python float too)
    x = np.array([[-0.5, 0.0, -0.0, 0.5, 2.0], [2.0**53 + 2, np.inf, -np.inf, np.nan, -2.5]])
    with np.errstate(invalid="ignore"):
        got = f.ceil(x)
    want = [[-0.0, 0.0, -0.0, 1.0, 2.0], [2.0**53 + 2, np.nan, np.nan, np.nan, -2.0]]
    assert got.shape == (2, 5)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.signbit(got[0]).tolist() == [True, False, True, False, False]
    assert math.isnan(f.ceil(float("inf")))


def test_maximum_and_minimum_return_an_argument_exactly():
    # the arithmetic form a + (b - a) * (b < a) gave minimum(0.7, 0.1) = 0.09999999999999998 and
    # NaN for maximum(inf, 1.0) (inf + (1 - inf) * 0): the result must be one of the arguments
    import numpy as np

    assert f.minimum(0.7, 0.1) == 0.1 and f.maximum(0.1, 0.7) == 0.7
    assert f.maximum(math.inf, 1.0) == math.inf and f.minimum(-math.inf, 1.0) == -math.inf
    assert f.minimum(math.inf, 2) == 2 and f.maximum(3, 2.5) == 3
    a = np.array([0.7, math.inf, 0.2])
    assert list(f.minimum(a, 0.1)) == [0.1, 0.1, 0.1]
    assert list(f.maximum(a, 0.3)) == [0.7, math.inf, 0.3]
    assert list(f.maximum(1.0, np.array([math.inf, 0.5]))) == [math.inf, 1.0]


def test_remote_ranks_per_token_by_hand():
    # DeepSeek's 256 experts, top-8: on one rank nothing leaves; with one expert per rank every
    # expert but a 1-in-256 local one is remote (8 x 255/256); on 2 ranks of 128 experts the other
    # rank is missed only when all 8 fall on this one, C(128, 8) / C(256, 8) = 0.00349
    assert f.remote_ranks_per_token(256, 8, 1) == pytest.approx(0.0)
    assert f.remote_ranks_per_token(256, 8, 256) == pytest.approx(8 * 255 / 256, rel=1e-12)
    two = 1 - math.comb(128, 8) / math.comb(256, 8)
    assert (
        f.remote_ranks_per_token(256, 8, 2)
        == pytest.approx(two, rel=1e-12)
        == pytest.approx(0.99651, rel=1e-5)
    )
    # a dispatch per rank moves at most what one per expert does (8 x 7/8 = 7 copies at EP8)
    ep8 = f.remote_ranks_per_token(256, 8, 8)
    assert ep8 == pytest.approx(4.6328, rel=1e-4) and ep8 < 8 * 7 / 8
    assert f.all_to_all_bytes_per_gpu_per_rank(100, 2.0, 7168, 2) == 100 * 2 * 7168 * 2


def test_two_batch_overlap_takes_the_longer_leg_or_runs_serially():
    # 10 ms of compute, 6 ms of all-to-all: serially 16 ms; overlapped, compute on 85 % of the SMs
    # (10 / 0.85 = 11.76 ms) hides the 6; with 2 ms of compute and 6 of all-to-all the wire binds
    assert f.two_batch_seconds(10.0, 6.0, 0.15, False) == 16.0
    assert f.two_batch_seconds(10.0, 6.0, 0.15, True) == pytest.approx(10.0 / 0.85, rel=1e-12)
    assert f.two_batch_seconds(2.0, 6.0, 0.15, True) == 6.0
    # nothing to hide: the overlap would only cost SMs, so the operator leaves it off
    assert f.two_batch_seconds(10.0, 0.0, 0.15, True) == 10.0


def test_the_off_domain_share_of_a_tokens_picks_by_hand():
    # plain all-to-all sends every copy bound off the token's domain over the NIC: 128 GPUs over
    # 72-GPU racks (72 + 56): a token on the 72 side sends 56/128 of its picks off, on the 56 side
    # 72/128: (72 x 56 + 56 x 72) / 128^2 = 1 - (72^2 + 56^2) / 128^2 = 0.492 (72 / 128 = 0.4375
    # taken as even domains, 1 - 72/128, which the plain path charged before: it undercounts)
    assert f.off_domain_share(128.0, 72.0) == pytest.approx((72 * 56 + 56 * 72) / 128**2, rel=1e-12)
    assert f.off_domain_share(32.0, 8.0) == pytest.approx(0.75, rel=1e-12)  # whole domains: 1 - 1/4
    assert f.off_domain_share(8.0, 72.0) == 0.0 and f.off_domain_share(72.0, 72.0) == 0.0
    # a token never reaches more other domains than its picks land off its own one (union bound)
    for span, dom in ((128.0, 72.0), (80.0, 72.0), (96.0, 64.0), (384.0, 72.0)):
        assert f.remote_domains(span, dom, 8) <= 8 * f.off_domain_share(span, dom) + 1e-12
    # a group inside one domain reaches no other, whatever the top-k (no NaN from a negative base
    # raised to a fractional power, nor an overflow)
    assert f.remote_domains(4.0, 8.0, 8.5) == 0.0
    assert f.remote_domains(np.array([1.0]), 1e6, 64)[0] == 0.0


def test_remote_domains_a_token_reaches_by_hand():
    # DeepSeek-V3: 8 routed experts over 4 nodes: each other node holds none of them with
    # probability (3/4)^8 = 0.1001, so a token crosses to 3 x 0.8999 = 2.6996 other nodes (not to
    # the ~7 other ranks of 31 that hold one, as a per-rank dispatch would send it)
    assert f.remote_domains(32.0, 8.0, 8) == pytest.approx(3 * (1 - 0.75**8), rel=1e-12)
    assert f.remote_domains(32.0, 8.0, 8) == pytest.approx(2.6996, rel=1e-4)
    assert f.remote_domains(8.0, 8.0, 8) == 0.0 and f.remote_domains(4.0, 8.0, 8) == 0.0
    # a group that does not fill whole domains: 128 GPUs over 72-GPU racks hold 72 + 56 of it; a
    # token on the 72-GPU side misses the other rack with probability (1 - 56/128)^8, one on the
    # 56-GPU side with (1 - 72/128)^8: 0.994 other racks on average, not the 0.777 of 128 / 72 =
    # 1.78 even domains ((n - 1)(1 - (1 - 1/n)^8))
    by_hand = (72 * (1 - (1 - 56 / 128) ** 8) + 56 * (1 - (1 - 72 / 128) ** 8)) / 128
    assert f.remote_domains(128.0, 72.0, 8) == pytest.approx(by_hand, rel=1e-12)
    assert 0.993 < by_hand < 0.994
    # 384 GPUs: 5 whole racks and 24 GPUs; arrays element-wise
    whole, rest = 1 - (1 - 72 / 384) ** 8, 1 - (1 - 24 / 384) ** 8
    by_hand = (360 * (4 * whole + rest) + 24 * 5 * whole) / 384
    got = f.remote_domains(np.array([384.0, 32.0]), 72.0, 8)
    assert got[0] == pytest.approx(by_hand, rel=1e-12) and got[1] == 0.0


def test_whole_systems_by_hand():
    # the count serving.systems_for_traffic and rl.systems give: 11,556 GPUs of 72-GPU racks are
    # 160.5 racks, 161 whole; a whole count stays; arrays too
    import numpy as np

    assert f.whole_systems(11556, 72) == 161 and f.whole_systems(144, 72) == 2 and f.whole_systems(4, 8) == 1
    assert list(f.whole_systems(np.array([1.0, 72.0, 73.0]), 72)) == [1.0, 1.0, 2.0]


def test_gpus_for_traffic_in_whole_copies_by_hand():
    # 10 requests/s x 1,024 output tokens = 10,240 tokens/s: one 34-GPU copy at 5,307 tokens/s/GPU
    # (180,454 tokens/s) or one 8-GPU copy at 4,342 (34,736); 100,000 tokens/s: 3 of the 8-GPU
    # copies (24 GPUs), 1 of the 34-GPU one
    assert f.deployment_copies(10240.0, 5307.0, 34) == 1 and f.gpus_for_traffic(1, 34) == 34
    assert f.deployment_copies(10240.0, 4342.0, 8) == 1 and f.gpus_for_traffic(1, 8) == 8
    assert f.deployment_copies(100000.0, 4342.0, 8) == 3 and f.gpus_for_traffic(3, 8) == 24
    # a deployment of 1.5 GPUs (instances sharing a domain) at 100 tokens/s/GPU serves 150 tokens/s:
    # 400 tokens/s take ceil(2.67) = 3 copies, 4.5 GPUs, so 5 whole GPUs
    assert f.deployment_copies(400.0, 100.0, 1.5) == 3 and f.gpus_for_traffic(3, 1.5) == 5
    # every configuration at once
    import numpy as np

    gpus = np.array([34.0, 8.0, 2.0])
    got = f.gpus_for_traffic(f.deployment_copies(10240.0, np.array([5307.0, 4342.0, 300.0]), gpus), gpus)
    assert got.tolist() == [34.0, 8.0, 36.0]  # the last: ceil(10,240 / 600) = 18 copies of 2 GPUs


def test_expert_parallelism_holds_whole_experts():
    # a review: DEP72 on DeepSeek's 256 routed experts held 256 / 72 = 3.56 experts a GPU; the
    # fullest GPU holds 4 (72 x 4 = 288 >= 256 > 72 x 3). With EPLB's one redundant slot a GPU,
    # every GPU holds ceil(3.56 + 1) = 5 slots; TensorRT-LLM's EP32 reference: 8 + 1 = 9 (288 slots)
    assert f.experts_held_per_gpu(256, 72) == 4
    assert f.experts_held_per_gpu(256, 72, 1.0) == 5
    assert f.experts_held_per_gpu(256, 32, 1.0) == 9
    assert f.experts_held_per_gpu(256, 48) == 6  # InferenceX's SGLang DEP48: 288 slots, 6 a GPU
    assert f.experts_held_per_gpu(384, 36) == 11  # Kimi K2 over half a rack: 10.67 -> 11
    assert f.experts_held_per_gpu(256, 8) == 32  # a divisor: exactly experts / ep


def test_tensor_parallelism_splits_heads_kv_heads_and_the_ffn():
    # Megatron-Core: heads % tp, num_query_groups % tp (megatron-core 0.16+, vLLM and TensorRT-LLM
    # also take a multiple of the KV heads, each rank holding a copy of one), ffn % tp
    from ipd_cli.engine.formulas import tensor_parallel_splits as splits

    assert not splits(5, 40, 8, 16384)  # Llama 4 Maverick: 40 heads split, 8 KV heads do not
    assert splits(4, 40, 8, 16384) and splits(8, 40, 8, 16384)
    assert splits(8, 64, 4, 0) and splits(16, 64, 8, 0)  # KV heads replicated: 8 = 2 x 4
    assert not splits(6, 64, 4, 0)  # 64 heads do not split over 6
    assert not splits(7, 28, 4, 18944) and splits(4, 28, 4, 18944)  # Qwen2.5-Math-7B
    assert splits(6, 96, 96, 49152) and not splits(5, 96, 96, 49152)  # GPT-3 175B: MHA
    assert not splits(3, 48, 48, 1000)  # an FFN of 1,000 does not split over 3


def test_the_md_c_wait_is_m_d_1_for_one_server_and_never_longer_with_more_servers():
    # the prefill pool's queue (serving.prefill_queue_s): exact for one server (Pollaczek-Khinchine),
    # nothing to wait for with nothing arriving, no steady state at or past capacity, and at the
    # same traffic an instance more never lengthens the wait
    import numpy as np

    from ipd_cli.engine.serving.queueing import erlang_b, mdc_wait_s

    rho = np.array([0.01, 0.5, 0.9, 0.999])
    assert mdc_wait_s(rho / 2.0, 2.0, 1) == pytest.approx(rho * 2.0 / (2 * (1 - rho)), rel=1e-12)
    assert mdc_wait_s(0.0, 0.04, 227) == 0.0
    assert mdc_wait_s(1e-9, 0.04, [1, 2, 227]) == pytest.approx(0.0, abs=1e-9)
    assert np.isinf(mdc_wait_s([3.0, 4.0], 1.0, 3)).all()
    # Erlang B summed from the top agrees with its recursion, past thousands of servers
    for c, a in [(3, 2.96), (50, 20.0), (2887, 2886.4), (5, 0.01)]:
        b = 1.0
        for k in range(1, c + 1):
            b = a * b / (k + a * b)
        assert erlang_b(c, a) == pytest.approx(b, rel=1e-12)
    loads = np.array([0.3, 0.97, 2.5, 9.99, 40.0, 226.5, 1500.2])
    servers = np.floor(loads)[:, None] + 1 + np.arange(60)[None, :]
    wait = mdc_wait_s(loads[:, None] / 0.04, 0.04, servers)  # loads a: requests/s x 0.04 s
    assert (np.diff(wait, axis=1) <= 1e-15).all()
    assert (wait[:, 0] > 0).all() and (wait >= 0).all() and np.isfinite(wait).all()


def test_harmonic_numbers_match_their_sums():
    import numpy as np

    sums = [0.0] + [sum(1.0 / k for k in range(1, n + 1)) for n in range(1, 300)]
    assert f.harmonic_number(0) == 0.0 and f.harmonic_number(1) == pytest.approx(1.0, abs=0.003)
    got = f.harmonic_number(np.arange(300.0))
    assert got[2:] == pytest.approx(sums[2:], abs=1e-4) and got[0] == 0.0
    assert f.harmonic_number(7) == pytest.approx(363 / 140, abs=1e-4)  # 1 + 1/2 + ... + 1/7


def test_an_attention_dp_balance_holds_a_prompt_by_hand():
    # DEP8, 32 users decoding 922 tokens at 1.87 a step: 32 x 1.87 / 922 = 0.0649 prompts a step.
    # Every other rank having one takes 8 x H(7) = 20.74 arrivals, 319.6 steps: the 60-step timeout
    # closes the window first, with 0.0649 x 60 = 3.894 others in it: (60 + 3.894 x 30) / 4.894
    lam = 32 * 1.87 / 922
    assert f.attention_dp_context_wait_steps(8, 4, lam, 60) == pytest.approx(
        (60 + lam * 60 * 30) / (1 + lam * 60), rel=1e-12
    )
    assert f.attention_dp_context_wait_steps(8, 4, lam, 60) == pytest.approx(36.13, abs=0.01)
    # two ranks, one prompt a step: the other rank has one after 2 x H(1) = 2 steps, with 2 others
    # in the window, which wait 1 step on average: (2 + 2 x 1) / 3
    assert f.attention_dp_context_wait_steps(2, 4, 1.0, 60) == pytest.approx(4 / 3, rel=2e-3)
    # one rank never waits, nor does a stack without the balance (timeout 0)
    assert f.attention_dp_context_wait_steps(1, 4, lam, 60) == 0.0
    assert f.attention_dp_context_wait_steps(8, 4, lam, 0) == 0.0
    # a prompt landing on a rank left with nothing to decode is released at once (TensorRT-LLM's
    # balance holds prompts only while every rank decodes): one sequence a rank never waits
    assert f.attention_dp_context_wait_steps(8, 1, lam, 60) == 0.0
    assert f.attention_dp_context_wait_steps(8, 2, lam, 60) == f.attention_dp_context_wait_steps(
        8, 4, lam, 60
    )


def test_an_attention_dp_balance_wait_stays_within_its_timeout_and_shrinks_with_traffic():
    import numpy as np

    lam = np.geomspace(1e-4, 1e3, 200)
    for ranks in (2, 4, 8, 16, 72, 256):
        w = f.attention_dp_context_wait_steps(ranks, 2, lam, 60)
        assert ((w > 0) & (w <= 60)).all()
        assert (np.diff(w) <= 1e-12).all()  # more prompts a step fill the window sooner


def test_a_host_loop_overlapped_with_the_gpu_takes_the_larger_else_adds():
    # TensorRT-LLM's overlap scheduler prepares step n+1 while the GPU runs step n: the step is the
    # larger of the GPU's 20 ms and the host's; a stack that runs its loop between steps adds it
    import numpy as np

    gpu, host = np.array([20e-3, 20e-3, 20e-3]), np.array([5e-3, 20e-3, 35e-3])
    assert f.host_bound_step_seconds(gpu, host, True) == pytest.approx([20e-3, 20e-3, 35e-3], rel=1e-15)
    assert f.host_bound_step_seconds(gpu, host, False) == pytest.approx([25e-3, 40e-3, 55e-3], rel=1e-15)
    assert f.host_bound_step_seconds(0.02, 0.0, True) == 0.02


def test_the_fewest_prefill_instances_for_a_wait_meet_it_one_fewer_does_not_and_a_looser_one_needs_no_more():
    # serving.ttft_target_s sizes the prefill pool: the fewest c whose M/D/c wait is within the
    # budget (target - a lone prompt's TTFT). At that c the wait is finite and within it; at c - 1
    # it is not (or the pool is at or past its rate); a looser budget never takes more instances
    import numpy as np

    from ipd_cli.engine.serving.queueing import mdc_servers_for_wait, mdc_wait_s

    rng = np.random.default_rng(7)
    lam = 10 ** rng.uniform(-2, 4, 4000)
    s = 10 ** rng.uniform(-3, 0, 4000)
    budgets = 10 ** rng.uniform(-5, 1, 4000)
    c = mdc_servers_for_wait(lam, s, budgets)
    wait = mdc_wait_s(lam, s, c)
    assert np.isfinite(wait).all() and (wait <= budgets).all() and (c > lam * s).all()
    fewer = c - 1
    stable = fewer > lam * s
    assert (mdc_wait_s(lam[stable], s[stable], fewer[stable]) > budgets[stable]).all()
    for looser in (1.5, 10.0, np.inf):
        assert (mdc_servers_for_wait(lam, s, budgets * looser) <= c).all()
    # by hand: M/D/1 at rho 0.5, S = 1 s waits 0.5 s (rho S / (2 (1 - rho))); 2 servers at the same
    # load wait less: a budget of 0.5 s takes one server, 0.49 s two
    assert mdc_servers_for_wait(0.5, 1.0, [0.5, 0.49]).tolist() == [1.0, 2.0]
    # nothing arriving: one server; a target the prompt alone misses (a negative budget): none
    assert mdc_servers_for_wait(0.0, 0.04, 0.1) == 1.0
    assert np.isnan(mdc_servers_for_wait([1.0, 1.0], 0.04, [-0.1, np.nan])).all()


def test_attention_head_share_by_hand():
    # r = 0.654 at half of 128: d0 = 128 (1 - 0.654) / (2 (0.654 - 0.5)) = 44.288 / 0.308 = 143.792
    d0 = 128 * 0.346 / 0.308
    assert f.attention_head_share(64, 128, 0.654) == pytest.approx(0.654)  # the measured point itself
    # head dim 96 (Megatron 22B): 96 / (96 + d0) x (128 + d0) / 128 = 0.40033 x 2.12338 = 0.85006
    assert f.attention_head_share(96, 128, 0.654) == pytest.approx(96 / (96 + d0) * (128 + d0) / 128)
    assert f.attention_head_share(96, 128, 0.654) == pytest.approx(0.8501, abs=1e-4)
    # the reference and wider heads (MLA's 192-wide query-key heads) keep the reference's efficiency
    assert f.attention_head_share(128, 128, 0.654) == pytest.approx(1.0)
    assert f.attention_head_share(192, 128, 0.654) == 1.0
    # no softmax cost (r = 1): every head dim at the reference's rate; arrays element-wise
    assert f.attention_head_share(64, 128, 1.0) == pytest.approx(1.0)
    got = f.attention_head_share(np.array([64.0, 128.0, 256.0]), 128, 0.654)
    assert got == pytest.approx([0.654, 1.0, 1.0])


def test_band_attention_flops_by_hand():
    # gpt-oss's 128-token window over 4,096 tokens: the first 128 queries see 1..128 keys, the rest
    # 128: (128 x 129 / 2 + 3,968 x 128) / 4,096 = 126.016 keys a query (NVIDIA's gpt-oss FLOP count,
    # Megatron-Bridge flop_utils, counts the same nonzeros); x 2 FLOPs x (4,096 + 4,096) widths
    keys = (128 * 129 / 2 + 3968 * 128) / 4096
    assert f.band_attention_flops_per_token_fwd(1, 4096, 128, 4096, 4096) == pytest.approx(2 * keys * 8192)
    # a window covering the sequence is causal attention: (seq + 1) / 2 keys a query
    assert f.band_attention_flops_per_token_fwd(1, 100, 128, 64, 64) == pytest.approx(2 * 50.5 * 128)
    # no sliding-window layers: nothing
    assert f.band_attention_flops_per_token_fwd(0.0, 4096, 128, 4096, 4096) == 0.0


def test_the_fewest_copies_for_a_wait_meet_it_one_fewer_does_not_and_more_traffic_needs_no_fewer():
    # an aggregated instance (or pinned pools) copied for a traffic behind one router: the copies'
    # sequence slots (and prefill instances) are one M/D/c queue each, so the copies are the
    # fewest N whose waits at N x the servers of a copy sum within the budget
    # (serving.slot_queue_s, serving.ttft_target_s)
    import numpy as np

    from ipd_cli.engine.serving.queueing import mdc_copies_for_wait, mdc_servers_for_wait, mdc_wait_s

    # by hand: one slot a copy, M/D/1 for one copy: 0.5 request/s of 1 s waits rho S / (2 (1 - rho))
    # = 0.5 s, so a budget of 0.5 s takes one copy and 0.49 s two (as mdc_servers_for_wait's)
    assert mdc_copies_for_wait(0.5, [(1.0, 1)], [0.5, 0.49]).tolist() == [1.0, 2.0]
    # 1 request/s holding one of a copy's 4 slots 10 s (a = 10): 3 copies (12 slots) are the least
    # stable; the copies are the fewest slots for the budget rounded up to whole copies
    for budget in (0.01, 0.3, 1.0, 6.0):
        slots = mdc_servers_for_wait(1.0, 10.0, budget)
        assert mdc_copies_for_wait(1.0, [(10.0, 4)], budget) == max(3.0, np.ceil(slots / 4)), budget
    # no arrivals: one copy; a budget below 0 or NaN: none; a group of 0 servers has no queue
    assert mdc_copies_for_wait(0.0, [(10.0, 4)], 0.1) == 1.0
    assert np.isnan(mdc_copies_for_wait(1.0, [(10.0, 4)], [-1.0, np.nan])).all()
    assert mdc_copies_for_wait(1.0, [(10.0, 4), (5.0, 0)], 1.0) == mdc_copies_for_wait(1.0, [(10.0, 4)], 1.0)
    rng = np.random.default_rng(11)
    n = 3000
    lam = 10 ** rng.uniform(-2, 4, n)
    slot_s, slots = 10 ** rng.uniform(0, 2, n), np.floor(10 ** rng.uniform(0, 3, n))
    pre_s, pre = 10 ** rng.uniform(-3, 0, n), np.floor(10 ** rng.uniform(0, 1.5, n))
    budget = 10 ** rng.uniform(-3, 1, n)
    groups = [(slot_s, slots), (pre_s, pre)]
    copies = mdc_copies_for_wait(lam, groups, budget)

    def waits(k):
        return mdc_wait_s(lam, slot_s, k * slots) + mdc_wait_s(lam, pre_s, k * pre)

    assert np.isfinite(waits(copies)).all() and (waits(copies) <= budget).all()
    assert (lam * slot_s < copies * slots).all() and (lam * pre_s < copies * pre).all()  # rho < 1
    less = waits(np.maximum(copies - 1, 1))
    assert ((copies == 1) | (less > budget)).all()  # one fewer misses (or is unstable: inf)
    for more in (1.5, 10.0):  # more traffic never takes fewer copies, a looser budget no more
        assert (mdc_copies_for_wait(lam * more, groups, budget) >= copies).all()
        assert (mdc_copies_for_wait(lam, groups, budget * more) <= copies).all()


def test_erlang_b_by_quadrature_equals_the_sum_and_the_wait_interval_holds_the_wait():
    # Erlang B from its integral by Gauss-Legendre against its positive-term sum (the recursion
    # unrolled), loads 30-10^6 from the least stable pool to 45 sqrt(a) servers past it; and
    # queueing.wait_interval_s, the closed-form bounds a search decides from, around mdc_wait_s
    import numpy as np

    from ipd_cli.engine.serving.queueing import _erlang_b_quad, _erlang_b_sum, mdc_wait_s, wait_interval_s

    rng = np.random.default_rng(7)
    a = np.exp(rng.uniform(np.log(30), np.log(1e6), 600))
    c = np.maximum(np.floor(a + rng.uniform(-1, 45, 600) * np.sqrt(a)), np.floor(a) + 1)
    exact, quad = _erlang_b_sum(c, a), _erlang_b_quad(c, a)
    big = exact > 1e-300
    assert np.allclose(quad[big], exact[big], rtol=1e-11, atol=0)
    assert (quad[~big] < 1e-290).all()
    # by hand: B(1, a) = a / (1 + a); B(2, 1) = 1/5 (1 / B = 1 + 2 + 2)
    assert _erlang_b_sum(np.array([1.0, 2.0]), np.array([0.5, 1.0])).tolist() == pytest.approx([1 / 3, 0.2])
    s = 10 ** rng.uniform(-3, 2, 600)
    for load in (a, a / 1000):
        servers = np.maximum(np.floor(load + rng.uniform(-1, 45, 600) * np.sqrt(load)), np.floor(load) + 1)
        wait = mdc_wait_s(load / s, s, servers)
        lo, hi, sure = wait_interval_s(load / s, s, servers)
        assert (hi >= wait).all() and (np.where(sure, lo, 0.0) <= wait).all()
        # tight a few sqrt(a) servers past the load (what a search needs near its answer)
        past = ((servers - load) > 3 * np.sqrt(load)) & sure
        assert past.sum() > 100 and (hi[past] <= 1.01 * lo[past]).all()


def test_a_poisson_pmf_of_pools_all_below_the_table_is_the_one_of_the_same_pools_beside_larger_ones():
    # queueing._log_poisson_pmf takes its table without gathering where every server count is
    # below LGAMMA_TABLE: each element must be the one it gets in a mixed array, to the bit; and
    # by hand, log P(X = 1) at a = 1 is log(e^-1) = -1, at c = 2, a = 2: log(2 e^-2) = log 2 - 2
    import numpy as np

    from ipd_cli.engine.serving.queueing import LGAMMA_TABLE, _log_poisson_pmf

    rng = np.random.default_rng(3)
    c = np.floor(rng.uniform(1, LGAMMA_TABLE, 300))
    a = c * rng.uniform(0.2, 0.999, 300)
    large = np.array([LGAMMA_TABLE + 5.0, 4 * LGAMMA_TABLE])
    mixed = _log_poisson_pmf(np.concatenate([c, large]), np.concatenate([a, 0.9 * large]))
    assert _log_poisson_pmf(c, a).tobytes() == mixed[: c.size].tobytes()
    assert _log_poisson_pmf(np.array([1.0, 2.0]), np.array([1.0, 2.0])).tolist() == pytest.approx(
        [-1.0, math.log(2) - 2]
    )


def _decode_and_prefill_by_the_loop(lam, slot_s, slots, prefill_s, budget, cost):
    """The decode and prefill search as first written (each candidate pair searched in turn, the
    waits summed): the reference for evaluate.decode_and_prefill_for_ttft's shortcuts."""
    import numpy as np

    from ipd_cli.engine.serving.queueing import mdc_servers_for_wait, mdc_wait_s

    def servers(service, wait):
        with np.errstate(invalid="ignore"):
            return mdc_servers_for_wait(lam, service, np.where(wait > 0, wait, np.nan))

    def queue(service, c):
        with np.errstate(all="ignore"):
            return mdc_wait_s(lam, service, c)

    least_dec = np.ceil((np.floor(lam * slot_s) + 1) / slots)
    least_pre = np.floor(lam * prefill_s) + 1
    best_dec, best_pre, best = least_dec.copy(), least_pre.copy(), np.full(len(lam), np.inf)

    def keep(d, p, at):
        with np.errstate(invalid="ignore"):
            gpus = np.where(np.isnan(d) | np.isnan(p) | ~at, np.inf, cost(p, d))
        better = gpus < best
        best_dec[better], best_pre[better], best[better] = d[better], p[better], gpus[better]

    every = np.ones(len(lam), dtype=bool)
    keep(np.ceil(servers(slot_s, budget - queue(prefill_s, least_pre)) / slots), least_pre, every)
    d = np.ceil(servers(slot_s, 0.5 * budget) / slots)
    keep(d, servers(prefill_s, budget - queue(slot_s, d * slots)), every)
    live = every
    for k in range(16):
        d = least_dec + k
        p = servers(prefill_s, budget - queue(slot_s, d * slots))
        keep(d, p, live)
        live = live & ~(p <= least_pre)
    fits = np.isfinite(best)
    return np.where(fits, best_dec, least_dec), np.where(fits, best_pre, least_pre)


def test_the_decode_and_prefill_search_takes_the_pools_the_plain_loop_takes():
    # evaluate.decode_and_prefill_for_ttft decides from closed-form bounds, prices the pools past
    # the prefill floor without a search, searches the pools left at once and leaves those no pair
    # can price below the best: on random cells, with prefill and decode instances filling each
    # other's holes (paid GPUs that do not grow with D or P everywhere), the same pools as the
    # plain loop
    import numpy as np

    from ipd_cli.engine import formulas as f
    from ipd_cli.engine.serving.evaluate import decode_and_prefill_for_ttft

    rng = np.random.default_rng(3)
    n = 1500
    lam = 10 ** rng.uniform(-1, 2.5, n)
    slots = np.floor(2 ** rng.uniform(0, 8, n))
    slot_s = 10 ** rng.uniform(0, 1.7, n)
    prefill_s = 10 ** rng.uniform(-2.5, -0.5, n)
    budget = 10 ** rng.uniform(-2.5, 0.5, n) * np.where(rng.uniform(size=n) < 0.05, -1, 1)
    paid_p, paid_d = np.floor(2 ** rng.uniform(0, 4, n)), np.floor(2 ** rng.uniform(0, 5, n))
    fill_p, fill_d = np.floor(rng.uniform(0, 3, n)), np.floor(rng.uniform(0, 2, n))
    cols = (paid_p, fill_p, paid_d, fill_d)

    def cost(p, d):
        return f.packed_gpus(p, paid_p, fill_p, d, paid_d, fill_d)

    want = _decode_and_prefill_by_the_loop(lam, slot_s, slots, prefill_s, budget, cost)
    got = decode_and_prefill_for_ttft(lam, slot_s, slots, prefill_s, budget, cols)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_the_decode_and_prefill_search_stops_at_the_least_stable_prefill_pool():
    # the loop stops at the first decode pool whose prefill pool is the least stable one, even
    # where a larger decode pool would cost fewer GPUs (its instances' holes taking prefill
    # instances): the search's batch of larger pools does too. 1 request/s; a slot held 0.5 s,
    # one slot a decode instance: D = 1 is the least stable pool (a = 0.5), its wait the M/D/1
    # one, rho S / (2 (1 - rho)) = 0.25 s; D = 2: Erlang B(2, 0.5) = 0.125 / 1.625, C = 0.1, M/M/2
    # 0.1 x 0.5 / 1.5 = 0.03333, Cosmetatos 1 + 0.75 (sqrt(14) - 2) / 8 = 1.16328: 0.019388 s.
    # Prompts of 2.5 s: P = 3 is the least stable pool (a = 2.5), B(3, 2.5) = 2.604167 / 9.229167,
    # C = 0.702246, M/M/3 3.51123 s, Cosmetatos 1.019657: 1.790126 s; P = 4: 0.288280 s.
    # Budget 1.9 s: at D = 1, P = 3 misses (2.04 s) and P = 4 fits; at D = 2, P = 3 fits (1.8095 s)
    # and the loop stops. Paid GPUs: a prefill instance 4, a decode instance 1 with a hole for one
    # prefill instance: (D, P) = (2, 3) takes 2 + 1 x 4 = 6 GPUs, (3, 3) would take 3, (1, 4) 13
    import numpy as np

    from ipd_cli.engine import formulas as f
    from ipd_cli.engine.serving.evaluate import decode_and_prefill_for_ttft
    from ipd_cli.engine.serving.queueing import mdc_wait_s

    lam, slot_s, prefill_s = 1.0, 0.5, 2.5
    dec = mdc_wait_s(lam, slot_s, np.array([1.0, 2.0]))
    pre = mdc_wait_s(lam, prefill_s, np.array([3.0, 4.0]))
    assert dec == pytest.approx([0.25, 0.019388], rel=1e-4) and pre == pytest.approx(
        [1.790126, 0.288280], rel=1e-5
    )
    # a prefill instance's paid GPUs and how many fit in a decode hole; a decode instance's
    cols = (4.0, 1.0, 1.0, 0.0)
    assert [f.packed_gpus(p, 4.0, 1.0, d, 1.0, 0.0) for d, p in ((2, 3), (3, 3), (1, 4))] == [6.0, 3.0, 13.0]
    arr = lambda v: np.array([v])  # noqa: E731
    got = decode_and_prefill_for_ttft(arr(lam), arr(slot_s), arr(1.0), arr(prefill_s), arr(1.9), cols)
    assert (got[0][0], got[1][0]) == (2.0, 3.0)

    def cost(p, d):
        return f.packed_gpus(p, *cols[:2], d, *cols[2:])

    want = _decode_and_prefill_by_the_loop(arr(lam), arr(slot_s), arr(1.0), arr(prefill_s), arr(1.9), cost)
    assert (want[0][0], want[1][0]) == (2.0, 3.0)
