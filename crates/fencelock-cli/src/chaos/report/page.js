// The chaos report's page (inlined by report/mod.rs): the timeline's zoom, and a violation's
// "show" link scrolling the timeline to its mark. The page is whole without it.
(function () {
  "use strict";
  var scroll = document.getElementById("timeline-scroll");
  if (!scroll) { return; }
  var zoomables = scroll.querySelectorAll(".zoomable");
  var zoom = 1;
  function base() { return Number(zoomables[0].getAttribute("data-base-width")) || 1; }
  function setZoom(z) {
    zoom = Math.max(scroll.clientWidth / base(), Math.min(z, 64));
    zoomables.forEach(function (svg) {
      svg.setAttribute("width", String(base() * zoom));
    });
  }
  document.querySelectorAll("button[data-zoom]").forEach(function (button) {
    button.addEventListener("click", function () {
      var factor = Number(button.getAttribute("data-zoom"));
      var middle = (scroll.scrollLeft + scroll.clientWidth / 2) / zoom;
      setZoom(factor === 0 ? 0 : zoom * factor);
      scroll.scrollLeft = middle * zoom - scroll.clientWidth / 2;
    });
  });
  document.querySelectorAll("a.show[data-violation]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      var mark = document.getElementById("violation-" + link.getAttribute("data-violation"));
      if (!mark) { return; }
      event.preventDefault();
      scroll.scrollIntoView({ block: "center" });
      scroll.scrollLeft = Number(mark.getAttribute("x")) * zoom - scroll.clientWidth / 3;
      mark.classList.add("flash");
      setTimeout(function () { mark.classList.remove("flash"); }, 1500);
    });
  });
})();
