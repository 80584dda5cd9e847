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

    function isLive(value, max) {
        return value === null || value === undefined || (max !== null && max !== undefined && value >= max);
    }

    return {
        // One callback for a new end (a push) and a new value (the user, Play, Live): a push sets
        // off one callback, not two. Returns the handle's new value and the instant passed on to
        // the server (time_machine.choose_instant), unless it is Live and the page already says
        // so: the handle following each new change costs no request.
        move: function (max, value, disabled, label) {
            const clientside = window.dash_clientside;
            const noUpdate = clientside.no_update;
            const triggered = ((clientside.callback_context || {}).triggered || []).map(t => t.prop_id);
            let handle = noUpdate;
            if (max !== end) {
                const follows = !disabled && isLive(value, end) && value !== max;
                end = max;
                if (follows) {
                    handle = value = max;
                } else if (!triggered.some(id => id.endsWith(".value"))) {
                    return [noUpdate, noUpdate];  // only the end moved, without the handle
                }
            }
            return [handle, isLive(value, max) && label === "Live" ? noUpdate : value];
        },
    };
})();
