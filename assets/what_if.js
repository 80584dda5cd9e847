// The Lateness tab (dashboard/panels/what_if.py) draws when it is opened, when the day changes and
// when a new snapshot comes, and only while it is open: each moves its tick here, in the page, so
// the tab costs no request while it is hidden.
window.dash_clientside = window.dash_clientside || {};
window.dash_clientside.whatIf = {
    follow: function (snapshot, tab, day, shownTab, tick) {
        return tab === shownTab ? (tick || 0) + 1 : window.dash_clientside.no_update;
    },
};
