// The time machine's slider holds epoch seconds; its tooltip shows them as a UTC time
// (dcc.Slider's tooltip.transform names a function of window.dccFunctions).
window.dccFunctions = window.dccFunctions || {};
window.dccFunctions.utcClock = function (seconds) {
    return new Date(seconds * 1000).toISOString().slice(11, 19) + " UTC";
};
