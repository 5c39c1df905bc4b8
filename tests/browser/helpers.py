"""Helpers shared by the review page's browser tests."""

from __future__ import annotations

from typing import Any

# Keys dispatched from inside the page, so their timing relative to a card
# swap is exact (a key sent over the wire from the test lands whenever the
# browser gets to it). ``when`` is "now" or "after-swap" (ms after the next
# card is swapped in).
SEND_KEYS = """
([keys, when, delay]) => {
  const send = () => keys.forEach((key) => {
    const target = document.activeElement || document.body;
    target.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
  });
  if (when === 'now') { send(); return; }
  let armed = true;
  document.addEventListener('htmx:afterSwap', (e) => {
    if (armed && e.detail.target && e.detail.target.id === 'card') {
      armed = false;
      setTimeout(send, delay);
    }
  });
}
"""


def card_item(page: Any) -> str | None:
    return page.locator("#card").get_attribute("data-item")


def wait_for_card_change(page: Any, previous: str | None) -> None:
    """Until another item's card shows and takes keys: swapped in, wired up
    by htmx, and past the moment in which the page ignores verdict keys."""
    page.wait_for_function(
        """prev => {
          const c = document.getElementById('card');
          const layout = document.getElementById('review');
          return c && c.dataset.item !== prev && !c.classList.contains('htmx-added')
            && (!layout || layout.dataset.state !== 'busy' && layout.dataset.state !== 'hold');
        }""",
        arg=previous or "",
    )


def start(page: Any) -> None:
    page.keyboard.press("n")
    wait_for_card_change(page, "")


def send_keys(page: Any, keys: list[str], *, when: str = "now", delay_ms: int = 0) -> None:
    page.evaluate(SEND_KEYS, [keys, when, delay_ms])


def quiet_moment(page: Any, ms: int = 500) -> None:
    """Long enough for a stray key's request to go out and come back: the
    assertions after it are about something *not* happening."""
    page.wait_for_timeout(ms)
    page.wait_for_load_state("networkidle")
