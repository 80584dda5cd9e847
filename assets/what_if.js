// The Lateness tab (dashboard/panels/what_if.py) draws when it is opened and when the day changes
// (here), and when a push comes (assets/push.js), only while it is open: each moves its tick, in
// the page, so the tab costs no request while it is hidden. The tick holds the time it moved.
window.dash_clientside = window.dash_clientside || {};
window.dash_clientside.whatIf = {
    follow: function (tab, day, shownTab) {
        return tab === shownTab ? Date.now() : window.dash_clientside.no_update;
    },
};
