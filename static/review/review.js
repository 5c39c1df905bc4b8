// The review page's keyboard, lease clock and lease renewal. Everything here
// is an accelerator: the page works as plain forms without it.
(function () {
  "use strict";

  // Renewed this often while the reviewer is active, or at half the lease
  // when the queue's lease is shorter than two of these (it may be 10 s).
  var RENEW_EVERY_MS = 60 * 1000;
  var RENEW_AT_LEAST_MS = 2000;
  var TICK_MS = 1000;
  var ACTIVE_WINDOW_MS = 2 * 60 * 1000;
  var NOTE_KEY = "reviewqueue-note-";
  // What is typed in the editor and the send-back note survives a timed-out
  // session too, per item, like the note.
  var EDIT_KEY = "reviewqueue-edit-";
  var SEND_BACK_KEY = "reviewqueue-send-back-";
  // Each panel and the text field that takes focus when it opens.
  var PANELS = { "edit-panel": "edited-output", "send-back-panel": "send-back-note" };
  // Nobody reads an item in less than this: a verdict key arriving sooner
  // after a new item shows was meant for the previous one.
  var HOLD_MS = 150;
  var STATUS_MS = 8000;
  // Keys that act on the item shown; ignored while the page is not ready.
  // The reason labels' number keys (1 to how many labels the page renders,
  // data-reason-labels) are action keys too: see isActionKey.
  var ACTION_KEYS = /^([arsuneb]|Enter)$/;
  // Of those, the ones that may still act during the hold: they concern the
  // previous item (undo) or no item (next).
  var HOLD_ALLOWS = /^[un]$/;

  var lastActivity = Date.now();
  var leaseDeadline = null;
  // The lease's length as last granted, and when a renewal last went out.
  var leaseLengthMs = 0;
  var lastRenewal = Date.now();
  // "busy": a request that replaces the card is in flight; "hold": a new
  // item has just shown; "ready": keys act on the item shown.
  var state = "ready";
  var holdTimer = null;
  var ignoredKeys = [];
  var statusTimer = null;

  function $(selector) {
    return document.querySelector(selector);
  }

  // How many reason labels the page offers, as the server rendered them.
  function reasonLabelCount() {
    var layout = document.getElementById("review");
    return layout ? parseInt(layout.getAttribute("data-reason-labels"), 10) || 0 : 0;
  }

  function isLabelKey(key) {
    return /^\d$/.test(key) && Number(key) >= 1 && Number(key) <= reasonLabelCount();
  }

  function isActionKey(key) {
    return ACTION_KEYS.test(key) || isLabelKey(key);
  }

  function card() {
    return document.getElementById("card");
  }

  function itemId() {
    var el = card();
    return el ? el.getAttribute("data-item") : "";
  }

  function setError(text) {
    var el = document.getElementById("form-error");
    if (el) el.textContent = text;
    var reasons = $(".reasons");
    if (reasons) reasons.classList.toggle("needs-label", Boolean(text));
  }

  // The armed choice lives on the buttons themselves, so a swapped-in card
  // starts unarmed without any reset racing the next keypress.
  function armedChoice() {
    var button = $("#card button.armed");
    return button ? button.value : null;
  }

  function arm(choice) {
    var approve = document.getElementById("approve-button");
    var reject = document.getElementById("reject-button");
    if (!approve || !reject) return;
    approve.classList.toggle("armed", choice === "approve");
    reject.classList.toggle("armed", choice === "reject");
    approve.setAttribute("aria-pressed", String(choice === "approve"));
    reject.setAttribute("aria-pressed", String(choice === "reject"));
    // Focus stays where it is: never on a button or a radio, where a stray
    // Space would press or tick it.
    if (choice === "approve") setError("");
  }

  function pickLabel(number) {
    var radio = document.getElementById("reason-" + number);
    if (!radio) return;
    radio.checked = true;
    setError("");
    arm("reject");
  }

  // Returns true when something was submitted, so Enter's default is held back.
  function submitArmed() {
    var armed = armedChoice();
    if (armed === "approve") {
      document.getElementById("approve-button").click();
      return true;
    }
    if (armed === "reject") {
      if (!$(".reasons input:checked")) {
        setError("A rejection needs a reason: press 1 to 5 to pick one.");
        return true;
      }
      document.getElementById("reject-button").click();
      return true;
    }
    if (document.getElementById("decide-form")) {
      setError("Choose first: a to approve, r to reject.");
      return true;
    }
    return false;
  }

  function clickIfPresent(id) {
    var el = document.getElementById(id);
    if (el) el.click();
  }

  // q: the queue switcher, on the queue in view; Tab moves along it, Enter follows.
  function focusSwitcher() {
    var switcher = document.getElementById("queue-switcher");
    if (!switcher) return;
    var link = switcher.querySelector('a[aria-current="page"]') || switcher.querySelector("a");
    if (link) {
      link.focus();
      link.scrollIntoView({ block: "nearest", inline: "nearest" });
    }
  }

  function toggleShortcuts() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog) return;
    if (dialog.open) {
      dialog.close();
      return;
    }
    dialog.showModal();
    // Its Close button takes focus (autofocus: Enter closes, never follows a
    // link in the instructions), and the browser scrolls to it, at the end;
    // the instructions come first, so the dialog opens at its top.
    dialog.scrollTop = 0;
  }

  // Enter submits a verdict only when the card has focus (its title, the
  // output being read, a reason) or nothing does; never from a link or button.
  function enterIsVerdict(target) {
    if (!target || target === document.body || target === document.documentElement) return true;
    if (target.closest && target.closest("a[href], button, summary, select, [role=button], [role=link]")) return false;
    var el = card();
    return Boolean(el && el.contains(target));
  }

  function isTyping(target) {
    if (!target || !target.tagName) return false;
    var tag = target.tagName.toLowerCase();
    if (tag === "textarea" || tag === "select" || target.isContentEditable) return true;
    return tag === "input" && !/^(radio|checkbox|button|submit|reset|hidden)$/i.test(target.type);
  }

  function onKeydown(event) {
    if (event.defaultPrevented || event.isComposing) return;
    var dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open) {
      if (event.key === "?") {
        event.preventDefault();
        dialog.close();
      }
      return; // Escape closes the dialog natively
    }
    if (isTyping(event.target)) {
      if (panelOf(event.target)) {
        onPanelKey(event);
        return;
      }
      if (event.key === "Escape") {
        event.target.blur();
        event.preventDefault();
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.id === "note") {
        if (!acceptsKey("Enter")) {
          event.preventDefault();
          ignoreKey("Ctrl+Enter");
        } else if (submitArmed()) event.preventDefault();
      }
      return;
    }
    if (event.altKey || event.ctrlKey || event.metaKey) return; // leave browser shortcuts alone
    var key = event.key;
    // A focused link or button does what it says: Enter follows or presses it.
    if (key === "Enter" && !enterIsVerdict(event.target)) return;
    if (isActionKey(key) && !acceptsKey(key)) {
      event.preventDefault();
      ignoreKey(key);
      return;
    }
    if (isActionKey(key)) clearKeyStatus();
    if (key === "Enter") {
      if (submitArmed()) {
        event.preventDefault();
      } else if (document.getElementById("next-button")) {
        event.preventDefault();
        clickIfPresent("next-button");
      }
      return;
    }
    var handled = true;
    if (key === "a") arm("approve");
    else if (key === "r") arm("reject");
    else if (isLabelKey(key)) pickLabel(key);
    else if (key === "e") openPanel("edit-panel");
    else if (key === "b") openPanel("send-back-panel");
    else if (key === "s") clickIfPresent("skip-button");
    else if (key === "u") clickIfPresent("undo-button");
    else if (key === "n") clickIfPresent("next-button");
    else if (key === "q") focusSwitcher();
    else if (key === "?") toggleShortcuts();
    else if (key === "Escape") {
      arm(null);
      setError("");
    } else handled = false;
    if (handled) event.preventDefault();
  }

  // --- edit and approve, send back: a panel each, its text never lost -------

  function panelOf(target) {
    if (!target || !target.closest) return null;
    var panel = target.closest("details.panel");
    return panel && PANELS[panel.id] === target.id ? panel : null;
  }

  function openPanel(id) {
    var panel = document.getElementById(id);
    if (!panel) return;
    Object.keys(PANELS).forEach(function (other) {
      var el = document.getElementById(other);
      if (el && other !== id) el.open = false;
    });
    panel.open = true;
    var field = document.getElementById(PANELS[id]);
    if (field) field.focus({ preventScroll: false });
  }

  // Closing keeps what was typed: the panel opens again with it.
  function closePanel(panel) {
    panel.open = false;
    var title = document.getElementById("card-title");
    if (title) title.focus({ preventScroll: true });
  }

  function submitPanel(panel) {
    var field = document.getElementById(PANELS[panel.id]);
    var error = panel.querySelector(".error");
    if (panel.id === "send-back-panel" && field && !field.value.trim()) {
      if (error) error.textContent = "Sending back needs a note: say what the next try should change.";
      return;
    }
    if (panel.id === "edit-panel" && field && !field.value.trim()) {
      if (error) {
        error.textContent =
          "The corrected output is empty: type the output to approve, or close the editor (Esc) and press a " +
          "to approve the original. Nothing was recorded.";
      }
      return;
    }
    var form = panel.querySelector("form");
    if (form) form.requestSubmit();
  }

  // Inside the editor or the note every key is text, except Esc (close,
  // keeping the text) and Ctrl+Enter (submit, once: not while a request is
  // in flight or before the card was seen).
  function onPanelKey(event) {
    var panel = panelOf(event.target);
    if (event.key === "Escape") {
      event.preventDefault();
      closePanel(panel);
    } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      if (!acceptsKey("Enter")) ignoreKey("Ctrl+Enter");
      else submitPanel(panel);
    }
  }

  function storageKey(field) {
    if (!field || !itemId()) return null;
    if (field.id === "note") return NOTE_KEY + itemId();
    if (field.id === "edited-output") return EDIT_KEY + itemId();
    if (field.id === "send-back-note") return SEND_BACK_KEY + itemId();
    return null;
  }

  function saveText(field) {
    var key = storageKey(field);
    if (key) sessionStorage.setItem(key, field.value);
  }

  // A panel's text saved before a timed-out session comes back, with its
  // panel open, unless the server already returned the reviewer's text.
  function restorePanels() {
    Object.keys(PANELS).forEach(function (id) {
      var panel = document.getElementById(id);
      var field = document.getElementById(PANELS[id]);
      var key = storageKey(field);
      if (!panel || !key || panel.open) return;
      var saved = sessionStorage.getItem(key);
      if (saved !== null && saved !== field.value && saved !== "") {
        field.value = saved;
        panel.open = true;
      }
    });
  }

  function forgetTexts(id) {
    [NOTE_KEY, EDIT_KEY, SEND_BACK_KEY].forEach(function (prefix) {
      sessionStorage.removeItem(prefix + id);
    });
  }

  // --- ready or not: keys never act on a card the reviewer has not seen ------

  function acceptsKey(key) {
    if (state === "busy") return false;
    if (state === "hold") return HOLD_ALLOWS.test(key);
    return true;
  }

  function setState(next) {
    state = next;
    var layout = document.getElementById("review");
    if (layout) layout.setAttribute("data-state", next);
    var el = card();
    if (el) {
      if (next === "busy") el.setAttribute("aria-busy", "true");
      else el.removeAttribute("aria-busy");
    }
  }

  function becomeBusy() {
    if (holdTimer !== null) window.clearTimeout(holdTimer);
    holdTimer = null;
    setState("busy");
  }

  function becomeReady(newItem) {
    if (holdTimer !== null) window.clearTimeout(holdTimer);
    holdTimer = null;
    if (!newItem) {
      setState("ready");
      return;
    }
    setState("hold");
    holdTimer = window.setTimeout(function () {
      holdTimer = null;
      setState("ready");
    }, HOLD_MS);
  }

  // Ignored, never queued: a verdict must come from a key pressed while the
  // reviewer could see the item it applies to. The page says so, and which.
  function ignoreKey(key) {
    ignoredKeys.push(key);
    var el = document.getElementById("key-status");
    if (!el) return;
    el.textContent =
      "Ignored " + ignoredKeys.join(", ") + ": pressed while the next item was loading, before you could see it. " +
      "Nothing was done with " + (ignoredKeys.length === 1 ? "it" : "them") + "; press again if you meant it.";
    if (statusTimer !== null) window.clearTimeout(statusTimer);
    statusTimer = window.setTimeout(clearKeyStatus, STATUS_MS);
  }

  // The notice of ignored keys sits in the verdict bar, above its buttons,
  // so it covers nothing; outside the card (where no swap can remove it)
  // while a card is being replaced or when there is no bar.
  function dockKeyStatus(home) {
    var el = document.getElementById("key-status");
    var main = document.querySelector(".review-main");
    var bar = home ? null : $("#card .action-bar");
    if (!el || !main) return;
    if (bar && el.parentNode !== bar) bar.insertBefore(el, bar.firstChild);
    else if (!bar && el.parentNode !== main) main.insertBefore(el, main.firstChild);
  }

  function clearKeyStatus() {
    ignoredKeys = [];
    if (statusTimer !== null) window.clearTimeout(statusTimer);
    statusTimer = null;
    var el = document.getElementById("key-status");
    if (el) el.textContent = "";
  }

  // Requests that replace the whole card: a verdict, skip, undo, next.
  function replacesCard(event) {
    var elt = event.detail && event.detail.elt;
    var target = event.detail && event.detail.target;
    return Boolean(elt && elt.tagName === "FORM" && target && target.id === "card");
  }

  // --- the lease: a countdown, renewed while the reviewer is active ---------

  function startLeaseClock() {
    var lease = document.getElementById("lease");
    if (!lease) {
      leaseDeadline = null;
      return;
    }
    var left = parseInt(lease.getAttribute("data-seconds-left"), 10) || 0;
    leaseDeadline = Date.now() + left * 1000;
    leaseLengthMs = left * 1000;
    tickLease();
  }

  function tickLease() {
    var lease = document.getElementById("lease");
    if (!lease || leaseDeadline === null) return;
    var left = Math.max(0, Math.round((leaseDeadline - Date.now()) / 1000));
    var clock = lease.querySelector(".lease-clock");
    if (left === 0) {
      clock.textContent = "0:00";
      lease.lastChild.textContent = " — expired: the item went back to the queue";
    } else {
      var seconds = left % 60;
      clock.textContent = Math.floor(left / 60) + ":" + (seconds < 10 ? "0" : "") + seconds;
    }
    lease.classList.toggle("warn", left <= 60);
  }

  // Checked every tick: a renewal is due a minute after the last one, or
  // after half the lease when the lease is shorter (a tick early rather than
  // a tick late).
  function maybeRenew() {
    var lease = document.getElementById("lease");
    if (!lease || !window.htmx) return;
    var every = Math.max(RENEW_AT_LEAST_MS, Math.min(RENEW_EVERY_MS, leaseLengthMs / 2));
    if (Date.now() - lastRenewal + TICK_MS <= every) return;
    if (Date.now() - lastActivity > ACTIVE_WINDOW_MS) return;
    lastRenewal = Date.now();
    window.htmx.trigger(lease, "renew-lease");
  }

  function noteActivity() {
    lastActivity = Date.now();
  }

  // --- nothing lost: the note survives a timed-out session -----------------

  function saveNote() {
    var note = document.getElementById("note");
    if (note && itemId()) sessionStorage.setItem(NOTE_KEY + itemId(), note.value);
  }

  function restoreNote() {
    var note = document.getElementById("note");
    if (!note || !itemId() || note.value) return;
    var saved = sessionStorage.getItem(NOTE_KEY + itemId());
    if (saved) note.value = saved;
  }

  // True when the card had a place to say it; otherwise the site-wide
  // notice (static/js/htmx-notice.js) says it.
  function showProblem(text) {
    var notices = $("#card .notices");
    if (!notices) return false;
    var p = document.createElement("p");
    p.className = "notice notice-error";
    p.textContent = text;
    notices.replaceChildren(p);
    return true;
  }

  function saidOnCard(xhr, text) {
    if (showProblem(text) && xhr) xhr.reviewqueueSaid = true;
  }

  var shownItem = null;

  function onCardSwapped() {
    dockKeyStatus(false);
    startLeaseClock();
    lastRenewal = Date.now(); // the card's lease was just granted or read
    restoreNote();
    restorePanels();
    // htmx puts focus back on the element with the old focused element's id:
    // the new card's Approve button or a reason radio, where Space would act.
    // Only the note keeps focus, and only on the same item (a verdict
    // refused for a missing reason comes back with what was typed).
    var title = document.getElementById("card-title");
    var active = document.activeElement;
    var keep = active && active.id === "note" && itemId() === shownItem;
    // A refused edit or send-back comes back with its panel open: the
    // reviewer goes on typing there.
    var open = $("#card details.panel[open]");
    if (open && itemId() === shownItem) {
      var field = document.getElementById(PANELS[open.id]);
      if (field) {
        field.focus({ preventScroll: false });
        return;
      }
    }
    if (title && !keep) title.focus({ preventScroll: false });
  }

  function onCardSettled() {
    var now = itemId();
    var isNew = Boolean(now) && now !== shownItem;
    shownItem = now;
    becomeReady(isNew);
  }

  function pathOf(url) {
    try {
      return new URL(url, window.location.href).pathname;
    } catch (e) {
      return "";
    }
  }

  // A timed-out session: htmx followed the redirect to the sign-in page.
  function landedOnLogin(xhr) {
    var layout = document.getElementById("review");
    if (!layout || !xhr || !xhr.responseURL) return false;
    return pathOf(xhr.responseURL) === pathOf(layout.getAttribute("data-login-url"));
  }

  function unavailableText(html) {
    var fallback = "The database is unavailable. Nothing was saved. Try again in a few seconds; repeating the action is safe.";
    try {
      var notice = new DOMParser().parseFromString(html || "", "text/html").querySelector(".notice");
      return notice && notice.textContent.trim() ? "The database is unavailable. " + notice.textContent.trim() : fallback;
    } catch (e) {
      return fallback;
    }
  }

  function onBeforeSwap(event) {
    var layout = document.getElementById("review");
    var xhr = event.detail.xhr;
    if (!layout || !xhr) return;
    if (event.detail.target && event.detail.target.id === "card") dockKeyStatus(true);
    // Rather than swapping the sign-in page into the card, go there for real
    // and come back to this page afterwards.
    if (landedOnLogin(xhr)) {
      event.detail.shouldSwap = false;
      saveNote();
      var next = encodeURIComponent(layout.getAttribute("data-page-url"));
      window.location.assign(layout.getAttribute("data-login-url") + "?next=" + next);
      return;
    }
    if (xhr.status === 503 && !event.detail.shouldSwap) {
      // The database is away: say so and keep the card, so the same key works again.
      saidOnCard(xhr, unavailableText(xhr.responseText));
    } else if (xhr.status >= 400 && !event.detail.shouldSwap) {
      saidOnCard(xhr, "The server refused that (" + xhr.status + "). Nothing was recorded; reload the page.");
    }
  }

  document.addEventListener("keydown", onKeydown);
  ["keydown", "pointerdown", "pointermove", "wheel", "scroll", "input"].forEach(function (name) {
    document.addEventListener(name, noteActivity, { passive: true, capture: true });
  });
  document.addEventListener("input", function (event) {
    if (event.target && storageKey(event.target)) saveText(event.target);
    // What was wrong with the text is answered by typing: the error goes.
    var panel = panelOf(event.target);
    var error = panel && panel.querySelector(".error");
    if (error) error.textContent = "";
  });
  document.addEventListener("click", function (event) {
    if (!event.target.closest) return;
    if (event.target.closest("[data-shortcuts]")) toggleShortcuts();
    var opener = event.target.closest("[data-panel]");
    if (opener) openPanel(opener.getAttribute("data-panel"));
    var closer = event.target.closest("[data-close-panel]");
    if (closer && closer.closest("details.panel")) closePanel(closer.closest("details.panel"));
    // A button pressed on purpose: the notice about earlier keys is done.
    if (event.isTrusted && event.target.closest("#card button")) clearKeyStatus();
  });
  document.addEventListener("htmx:beforeSwap", onBeforeSwap);
  // Fired once per swapped-in element (the card, the context panel out of
  // band, a lease): act on the element itself, not on the request's target.
  document.addEventListener("htmx:afterSwap", function (event) {
    var swapped = event.target;
    if (swapped && swapped.id === "card") onCardSwapped();
    else if (swapped && swapped.id === "lease") startLeaseClock();
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.target && event.target.id === "card") onCardSettled();
  });
  document.addEventListener("htmx:sendError", function (event) {
    saidOnCard(event.detail.xhr, "The server did not answer. Nothing was lost: your choice is still here, try again.");
  });
  document.addEventListener("htmx:timeout", function (event) {
    saidOnCard(event.detail.xhr, "The server took too long to answer. Reload the page to see whether it was recorded.");
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    // A decision in flight: the note belongs to this item until the answer comes.
    if (event.detail.elt && event.detail.elt.id === "decide-form") saveNote();
    if (event.detail.elt && /^(edit-form|send-back-form)$/.test(event.detail.elt.id)) {
      saveText(document.getElementById(PANELS[event.detail.elt.closest("details.panel").id]));
    }
  });
  document.addEventListener("htmx:beforeSend", function (event) {
    if (replacesCard(event)) becomeBusy();
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    // Failed or answered without a new card (a refusal shown in place): the
    // card on screen is still the one the reviewer sees, so keys act again.
    if (replacesCard(event) && state === "busy" && !event.detail.successful) becomeReady(false);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    var verdictForms = /^(decide-form|edit-form|send-back-form)$/;
    if (elt && verdictForms.test(elt.id) && event.detail.successful && !landedOnLogin(event.detail.xhr)) {
      var id = elt.getAttribute("action").match(/(\d+)\/(decide|send-back)/);
      // Only once the item is gone: a refusal brings back the same item, text kept.
      if (id && id[1] !== itemId()) forgetTexts(id[1]);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    shownItem = itemId();
    dockKeyStatus(false);
    startLeaseClock();
    restoreNote();
    restorePanels();
    window.setInterval(function () {
      tickLease();
      maybeRenew();
    }, TICK_MS);
  });
})();
