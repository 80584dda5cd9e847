// The time machine's slider holds epoch seconds; its tooltip shows them as a UTC time
// (dcc.Slider's tooltip.transform names a function of window.dccFunctions).
window.dccFunctions = window.dccFunctions || {};
window.dccFunctions.utcClock = function (seconds) {
    return new Date(seconds * 1000).toISOString().slice(11, 19) + " UTC";
};

// Live is no value or the handle at the slider's right end, the newest instant (time_machine.is_live).
// Each new change moves the end: in Live the handle goes with it; an instant chosen before it
// stays put. dcc.Slider keeps its handle where it was for a value of null (at 0 on a new page,
// the left end once the slider spans the day), so Live needs a number.
window.dash_clientside = window.dash_clientside || {};
window.dash_clientside.timeMachine = (function () {
    let end = null;  // the slider's max before this change
    return {
        follow: function (max, disabled, value) {
            const live = value === null || value === undefined || (end !== null && value >= end);
            end = max;
            return !disabled && live && value !== max ? max : window.dash_clientside.no_update;
        },
        // The slider's value passed on to the server (time_machine.choose_instant) unless it is
        // Live and the page already says so: the handle following each new change costs no request.
        choose: function (value, max, label) {
            const live = value === null || value === undefined || (max !== null && max !== undefined && value >= max);
            return live && label === "Live" ? window.dash_clientside.no_update : value;
        },
    };
})();
