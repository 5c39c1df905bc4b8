/* The dashboard's live region. The polled #live section carries the sentence
   worth announcing in data-announce; it goes to #live-announcer only when it
   changes, so a 5-second poll is silent while nothing that matters moves. */
(function () {
  "use strict";
  var announcer = document.getElementById("live-announcer");
  var live = document.getElementById("live");
  if (!announcer || !live) { return; }
  var last = live.dataset.announce || "";
  document.body.addEventListener("htmx:afterSettle", function () {
    var section = document.getElementById("live");
    var news = section ? section.dataset.announce || "" : "";
    if (news && news !== last) {
      announcer.textContent = news;
    }
    last = news;
  });
})();
