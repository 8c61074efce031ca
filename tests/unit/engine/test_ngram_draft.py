"""Proposals from a sequence's own text (``engine/ngram_draft.py``): what follows the tail's latest earlier
occurrence; what a token costs in a decode, fitted from the decodes seen; and how many proposals pay for
themselves, from the sequence's acceptance and that cost."""

from __future__ import annotations

import pytest

from fara_desktop.engine.ngram_draft import PROBE, DecodeCost, NgramDrafter, propose


def test_the_tokens_after_the_tails_latest_occurrence_are_proposed():
    history = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 6, 2, 3]
    assert propose(history, 3) == [7, 8, 6]  # "2 3" last came before 7 8 6
    assert propose([5, 1, 2, 3, 4, 0, 1, 2, 3], 2) == [4, 0]  # the longest tail that matches: "1 2 3"
    assert propose([1, 2, 3, 4], 4) == []  # the tail never occurred before
    assert propose([1, 2, 1, 2], 4) == [1, 2]  # what follows, up to the end of the history
    assert propose([1, 2, 3], 0) == []


def cost_of(fixed: float, per_token: float) -> DecodeCost:
    cost = DecodeCost()
    for tokens in (1, 1, 3, 1, 5, 2):
        cost.observe(tokens, fixed + per_token * tokens)
    return cost


def test_a_decodes_cost_is_fitted_once_two_sizes_were_seen():
    cost = DecodeCost()
    cost.observe(1, 0.007)
    cost.observe(1, 0.007)
    assert cost.fitted() is None
    assert NgramDrafter().count(cost, 1, 8) == PROBE  # a proposal measures the cost of one more token
    fixed, per_token = cost_of(0.0035, 0.0036).fitted() or (0, 0)
    assert fixed == pytest.approx(0.0035) and per_token == pytest.approx(0.0036)


def test_proposals_pay_where_a_token_costs_little_in_a_decode_and_not_where_it_costs_a_decode():
    bound_by_reading = cost_of(0.080, 0.002)  # a 1.7B model: the weights read once whoever the tokens are for
    bound_by_computing = cost_of(0.0035, 0.0036)  # SmolLM2-135M on this machine: each token nearly a decode
    halves = NgramDrafter(successes=50, tries=100)
    assert halves.count(bound_by_reading, 1, 12) >= 2
    assert halves.count(bound_by_computing, 1, 12) == 0  # turned off: it would write slower
    copying = NgramDrafter(successes=95, tries=100)
    assert copying.count(bound_by_computing, 1, 12) > 0  # a quote accepted 95 % of the time pays even there


def test_a_sequence_whose_proposals_are_rejected_stops_proposing():
    drafter = NgramDrafter()
    cost = cost_of(0.080, 0.002)
    assert drafter.count(cost, 1, 12) > 0
    for _ in range(100):  # where a proposal costs 2 % of a decode, even one in twelve accepted still pays
        drafter.judge(4, 0)
    assert drafter.acceptance < 0.05 and drafter.count(cost, 1, 12) == 0
    assert drafter.draft([1, 2, 1, 2], cost, 1, 8) == []
    assert (drafter.proposed, drafter.accepted) == (400, 0)


def test_a_sequence_whose_steps_with_proposals_wrote_slower_than_plain_ones_stops_proposing():
    """Measured in use, whatever the cost model expected: its timed steps against the plain steps'."""
    cost = cost_of(0.080, 0.002)
    for _ in range(10):
        cost.plain_step(0.080)
    drafter = NgramDrafter(successes=90, tries=100)
    for _ in range(7):
        drafter.timed(0.100)
    assert drafter.count(cost, 1, 12) > 0  # not judged yet
    drafter.timed(0.100)
    assert drafter.count(cost, 1, 12) == 0 and drafter.off
    faster = NgramDrafter(successes=90, tries=100)
    for _ in range(20):
        faster.timed(0.030)
    assert faster.count(cost, 1, 12) > 0


def test_beside_other_writing_sequences_a_proposal_must_pay_for_the_step_it_slows_for_all_of_them():
    """Four clients wrote 11 % slower with proposals (19.1 against 21.6 tok/s, 1.7B shape through serve): each
    sequence weighed its own gain against a step that every sequence waits for. On a machine where a token costs
    much of a decode, a proposal that pays for a lone sequence does not beside three others."""
    cost = cost_of(0.010, 0.020)  # 10 ms a step and 20 ms a token: bound by computing
    drafter = NgramDrafter()
    assert drafter.count(cost, others=1, room=8, writers=1) > 0
    assert drafter.count(cost, others=4, room=8, writers=4) == 0


class _Drafted(NgramDrafter):
    """A drafter whose proposals cost ``seconds`` each to make (a draft model's decode)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(successes=95, tries=100)
        self.seconds = seconds

    def proposal_seconds(self) -> float:
        return self.seconds


def test_a_proposal_costs_what_making_it_costs_too():
    """A draft model's proposals each cost a decode of the draft: a draft as big as the model (the same file) never
    pays, one a tenth of its cost does (1.7B: a step 80 ms, SmolLM2-135M's decode about 8 ms)."""
    bound_by_reading = cost_of(0.080, 0.002)
    assert _Drafted(0.0).count(bound_by_reading, 1, 12) >= 4
    assert _Drafted(0.008).count(bound_by_reading, 1, 12) >= 2
    assert _Drafted(0.080).count(bound_by_reading, 1, 12) == 0
