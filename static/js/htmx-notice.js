/* Every page: an htmx request that fails is said, never silent. htmx swaps
   nothing for a 4xx/5xx answer, a network error or a timeout, so without
   this a failed button press or poll would look like nothing happened.
   A page script that already said it in its own place (the review card, a
   refused form shown beside its fields) marks the request's xhr with
   `reviewqueueSaid = true`; this script then keeps quiet. The notice goes
   once each request that failed has succeeded on a later try. */
(function () {
  "use strict";
  // The requests (method and path) whose last try failed.
  var failing = {};

  function notice() {
    return document.getElementById("htmx-problem");
  }

  // By method and path, not by element: a polled region replaces itself,
  // and htmx names its parent as the element of a request whose element left.
  function placeOf(detail) {
    var verb = detail.requestConfig ? detail.requestConfig.verb : "";
    return verb + " " + (detail.pathInfo ? detail.pathInfo.requestPath : "");
  }

  function say(event, text) {
    var xhr = event.detail && event.detail.xhr;
    var place = placeOf(event.detail);
    // After the page's own handlers, whatever order the scripts loaded in.
    window.setTimeout(function () {
      var box = notice();
      if (!box || (xhr && xhr.reviewqueueSaid)) return;
      box.textContent = text;
      box.hidden = false;
      failing[place] = true;
    }, 0);
  }

  function statusText(xhr) {
    if (xhr.status === 503) {
      return "The database is unavailable: nothing was saved. Try again in a few seconds; repeating it is safe.";
    }
    if (xhr.status >= 500) {
      return "The server failed (" + xhr.status + ") and did not do that. Try again, or reload the page.";
    }
    if (xhr.status === 403) {
      return "That was refused (403): your session may have ended. Reload the page.";
    }
    return "The server refused that (" + xhr.status + "). Reload the page and try again.";
  }

  function pathOf(url) {
    try {
      return new URL(url, window.location.href).pathname;
    } catch (e) {
      return "";
    }
  }

  // A session that ended sends an htmx request to the sign-in page, whose
  // whole document htmx would swap into the region that asked: go there for
  // real instead, and come back to this page afterwards. A page script that
  // already took care of it has turned the swap off.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var login = document.body.getAttribute("data-login-url");
    var xhr = event.detail.xhr;
    if (!login || !xhr || !xhr.responseURL || !event.detail.shouldSwap) return;
    if (pathOf(xhr.responseURL) !== pathOf(login) || pathOf(event.detail.pathInfo.requestPath) === pathOf(login)) return;
    event.detail.shouldSwap = false;
    window.location.assign(login + "?next=" + encodeURIComponent(window.location.pathname + window.location.search));
  });

  document.addEventListener("htmx:responseError", function (event) {
    say(event, statusText(event.detail.xhr));
  });
  document.addEventListener("htmx:sendError", function (event) {
    say(event, "The server did not answer: nothing was done. Check the connection and try again.");
  });
  document.addEventListener("htmx:timeout", function (event) {
    say(event, "The server took too long to answer: nothing is known to be done. Reload the page to see.");
  });
  // Once every place that failed has worked again, the notice goes.
  document.addEventListener("htmx:afterRequest", function (event) {
    var box = notice();
    if (!box || box.hidden || !event.detail.successful) return;
    delete failing[placeOf(event.detail)];
    if (Object.keys(failing).length === 0) {
      box.hidden = true;
      box.textContent = "";
    }
  });
})();
