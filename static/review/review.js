// The review page's keyboard, lease clock and lease renewal. Everything here
// is an accelerator: the page works as plain forms without it.
(function () {
  "use strict";

  var RENEW_EVERY_MS = 60 * 1000;
  var ACTIVE_WINDOW_MS = 2 * 60 * 1000;
  var NOTE_KEY = "reviewqueue-note-";

  var lastActivity = Date.now();
  var leaseDeadline = null;

  function $(selector) {
    return document.querySelector(selector);
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
    var button = $("#decide-form button.armed");
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
    if (choice === "approve") {
      approve.focus();
      setError("");
    } else if (choice === "reject") {
      var checked = $(".reasons input:checked") || $(".reasons input");
      if (checked) checked.focus();
    }
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

  function toggleShortcuts() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close();
    else dialog.showModal();
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
      if (event.key === "Escape") {
        event.target.blur();
        event.preventDefault();
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.id === "note") {
        if (submitArmed()) event.preventDefault();
      }
      return;
    }
    if (event.altKey || event.ctrlKey || event.metaKey) return; // leave browser shortcuts alone
    var key = event.key;
    if (key === "Enter") {
      if (submitArmed()) {
        event.preventDefault();
      } else if (document.getElementById("next-button") && !/^(button|a|input)$/i.test(event.target.tagName)) {
        event.preventDefault();
        clickIfPresent("next-button");
      }
      return;
    }
    var handled = true;
    if (key === "a") arm("approve");
    else if (key === "r") arm("reject");
    else if (/^[1-5]$/.test(key)) pickLabel(key);
    else if (key === "s") clickIfPresent("skip-button");
    else if (key === "u") clickIfPresent("undo-button");
    else if (key === "n") clickIfPresent("next-button");
    else if (key === "?") toggleShortcuts();
    else if (key === "Escape") {
      arm(null);
      setError("");
    } else handled = false;
    if (handled) event.preventDefault();
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

  function maybeRenew() {
    var lease = document.getElementById("lease");
    if (!lease || !window.htmx) return;
    if (Date.now() - lastActivity <= ACTIVE_WINDOW_MS) window.htmx.trigger(lease, "renew-lease");
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

  function showProblem(text) {
    var notices = $("#card .notices");
    if (!notices) return;
    var p = document.createElement("p");
    p.className = "notice notice-error";
    p.textContent = text;
    notices.replaceChildren(p);
  }

  function onCardSwapped() {
    startLeaseClock();
    restoreNote();
    var title = document.getElementById("card-title");
    if (title && card() && !card().contains(document.activeElement)) title.focus({ preventScroll: false });
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

  function onBeforeSwap(event) {
    var layout = document.getElementById("review");
    var xhr = event.detail.xhr;
    if (!layout || !xhr) return;
    // Rather than swapping the sign-in page into the card, go there for real
    // and come back to this page afterwards.
    if (landedOnLogin(xhr)) {
      event.detail.shouldSwap = false;
      saveNote();
      var next = encodeURIComponent(layout.getAttribute("data-page-url"));
      window.location.assign(layout.getAttribute("data-login-url") + "?next=" + next);
      return;
    }
    if (xhr.status >= 400 && !event.detail.shouldSwap) {
      showProblem("The server refused that (" + xhr.status + "). Nothing was recorded; reload the page.");
    }
  }

  document.addEventListener("keydown", onKeydown);
  ["keydown", "pointerdown", "pointermove", "wheel", "scroll", "input"].forEach(function (name) {
    document.addEventListener(name, noteActivity, { passive: true, capture: true });
  });
  document.addEventListener("input", function (event) {
    if (event.target && event.target.id === "note") saveNote();
  });
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-shortcuts]")) toggleShortcuts();
  });
  document.addEventListener("htmx:beforeSwap", onBeforeSwap);
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && (target.id === "card" || target.id === "lease")) {
      if (target.id === "card") onCardSwapped();
      else startLeaseClock();
    }
  });
  document.addEventListener("htmx:sendError", function () {
    showProblem("The server did not answer. Nothing was lost: your choice is still here, try again.");
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    // A decision in flight: the note belongs to this item until the answer comes.
    if (event.detail.elt && event.detail.elt.id === "decide-form") saveNote();
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.id === "decide-form" && event.detail.successful && !landedOnLogin(event.detail.xhr)) {
      var id = elt.getAttribute("action").match(/(\d+)\/decide/);
      if (id) sessionStorage.removeItem(NOTE_KEY + id[1]);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    startLeaseClock();
    restoreNote();
    window.setInterval(tickLease, 1000);
    window.setInterval(maybeRenew, RENEW_EVERY_MS);
  });
})();
