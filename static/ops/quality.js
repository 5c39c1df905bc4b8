/* The review-quality page. A settle form refused by the server (400: a
   missing label or note, an item already settled) comes back with its
   errors and what was typed; htmx would drop an error answer, so it is
   swapped in like any other. Any other failed answer is said above the page;
   no answer at all, by the site-wide notice (static/js/htmx-notice.js). */
(function () {
  "use strict";
  var problem = document.getElementById("quality-problem");
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (!xhr || xhr.status < 400) { return; }
    var target = event.detail.target;
    if (xhr.status === 400 && target && target.classList.contains("disagreement")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      return;
    }
    if (problem) {
      problem.textContent = "The server refused that (" + xhr.status + "). Nothing was changed; reload the page.";
      problem.hidden = false;
      xhr.reviewqueueSaid = true; // the site-wide notice keeps quiet
    }
  });
  // Swapped-in content is announced by htmx:load on the new element (an
  // outerHTML swap fires its other events on the element it removed, which
  // no longer bubbles here). The keyboard goes where the answer is: the first
  // error of a refused form, or the note that an item was settled.
  document.body.addEventListener("htmx:load", function (event) {
    var root = event.target;
    if (!root || root === document.body || !root.querySelector) { return; }
    var focus = root.querySelector(".has-error input, .has-error select, .has-error textarea");
    if (!focus && root.matches("[role=status]")) { focus = root; }
    if (!focus) { focus = root.querySelector("[role=status]"); }
    if (focus) {
      if (!focus.matches("input, select, textarea, button, a")) { focus.setAttribute("tabindex", "-1"); }
      focus.focus();
    }
  });
})();
