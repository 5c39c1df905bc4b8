/* The review-quality page. A settle form refused by the server (400: a
   missing label or note, an item already settled) comes back with its
   errors and what was typed; htmx would drop an error answer, so it is
   swapped in like any other. Any other failure is said above the page. */
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
    }
  });
  // After a swap, put the keyboard where the answer is: the first error of a
  // refused form, or the settled item's note.
  document.body.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.target;
    if (!target || !target.isConnected) {
      var id = event.detail.elt && event.detail.elt.getAttribute("hx-target");
      target = id && id.charAt(0) === "#" ? document.querySelector(id) : null;
    }
    if (!target) { return; }
    var focus = target.querySelector(".has-error input, .has-error select, .has-error textarea, [role=status]");
    if (focus) {
      if (!focus.matches("input, select, textarea")) { focus.setAttribute("tabindex", "-1"); }
      focus.focus();
    }
  });
})();
