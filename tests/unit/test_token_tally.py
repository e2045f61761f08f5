"""``approximate_tokens`` counts as LangChain's ``count_tokens_approximately`` does, each message once."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

import deerflow.models.tokens as tokens
from deerflow.models.tokens import approximate_tokens


def conversation(n: int) -> list:
    kinds = [
        lambda i: HumanMessage(f"question {i} " + "x" * (i % 37)),
        lambda i: AIMessage("", tool_calls=[{"name": "python", "args": {"code": "1+" * i}, "id": f"c{i}"}]),
        lambda i: ToolMessage(f"result {i}", tool_call_id=f"c{i}", name="python"),
        lambda i: AIMessage([{"type": "text", "text": "a" * i}, {"type": "image_url", "image_url": {"url": "x"}}]),
        lambda i: SystemMessage(f"note {i}", name="deerflow"),
    ]
    return [kinds[i % len(kinds)](i) for i in range(n)]


def test_the_sum_equals_langchains_count_for_every_prefix_and_kind_of_message() -> None:
    messages = conversation(60)
    for end in range(len(messages) + 1):
        assert approximate_tokens(messages[:end]) == count_tokens_approximately(messages[:end])


def test_a_message_edited_in_place_is_counted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    message = AIMessage("short")
    assert approximate_tokens([message]) == count_tokens_approximately([message])
    message.content = "a much longer answer than before " * 20
    assert approximate_tokens([message]) == count_tokens_approximately([message])
    message.tool_calls = [{"name": "python", "args": {"code": "x" * 400}, "id": "c1", "type": "tool_call"}]
    assert approximate_tokens([message]) == count_tokens_approximately([message])


def test_a_remembered_message_is_read_once_and_its_entry_goes_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = conversation(200)
    approximate_tokens(messages)
    read: list[int] = []
    real = tokens.count_tokens_approximately
    monkeypatch.setattr(tokens, "count_tokens_approximately", lambda ms: read.append(len(ms)) or real(ms))
    fresh = HumanMessage("one more")
    assert approximate_tokens([*messages, fresh]) == count_tokens_approximately([*messages, fresh])
    assert read == [1]  # only the new message was read
    watched = weakref.ref(fresh)
    del messages, fresh
    gc.collect()
    assert watched() is None  # nothing is kept alive by the tally


def test_entries_of_dead_messages_are_swept_when_the_table_doubles(monkeypatch: pytest.MonkeyPatch) -> None:
    tally = tokens._Tally()
    monkeypatch.setattr(tokens, "SWEEP_FLOOR", 100)
    tally._sweep_at = 100
    for _ in range(10):
        tally.count(conversation(60))  # each conversation dies after its count
    gc.collect()
    tally.count(conversation(60))
    assert len(tally) <= 2 * 100 + 60  # bounded by the live messages, not by all ever counted


def test_threads_counting_the_same_conversation_agree() -> None:
    messages = conversation(500)
    expected = count_tokens_approximately(messages)
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: approximate_tokens(messages), range(64))) == {expected}


def test_a_grown_conversation_reads_only_its_new_messages_and_its_last_kept_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tally = tokens._Tally()
    messages = conversation(300)
    assert tally.count(messages) == count_tokens_approximately(messages)
    looked_at: list[BaseMessage] = []
    real = tokens._shape
    monkeypatch.setattr(tokens, "_shape", lambda m: looked_at.append(m) or real(m))
    grown = [*messages, HumanMessage("next"), AIMessage("answer")]
    assert tally.count(grown) == count_tokens_approximately(grown)
    assert looked_at == grown[299:302] + grown[-1:]  # the kept last one, the two new ones, the new last one's share


def test_the_last_message_of_a_kept_conversation_edited_in_place_is_counted_again() -> None:
    tally = tokens._Tally()
    messages = conversation(40)
    tally.count(messages)
    messages[-1].content = "a streamed answer, longer now " * 30
    assert tally.count(messages) == count_tokens_approximately(messages)
    grown = [*messages, HumanMessage("and then")]
    messages[-1].content = "edited once more"
    assert tally.count(grown) == count_tokens_approximately(grown)


def test_a_conversation_is_retired_once_any_remembered_message_dies() -> None:
    # an identity stands for a message only while it lives: a freed message's address can be reused
    tally = tokens._Tally()
    messages = conversation(40)
    tally.count(messages)
    ids = list(map(id, messages))
    assert tally._kept(ids, tally._deaths) is not None
    transient = [HumanMessage("a note for one request")] * 1
    tally.count(transient)
    del transient
    gc.collect()
    assert tally._kept(ids, tally._deaths) is None
    assert tally.count(messages) == count_tokens_approximately(messages)  # counted from the entries again


def test_lists_that_share_no_prefix_or_differ_inside_are_counted_from_their_messages() -> None:
    tally = tokens._Tally()
    base = conversation(50)
    tally.count(base)
    for variant in (base[1:], base[:20] + conversation(30), [*base[:-1]], list(reversed(base)),
                    [SystemMessage("summary"), *base[25:]], base[:16]):
        assert tally.count(variant) == count_tokens_approximately(variant)


def test_short_lists_are_not_kept_as_conversations() -> None:
    tally = tokens._Tally()
    for message in conversation(40):
        tally.count((message,))  # the summarization middleware's message-by-message walk
    assert not tally._recent
