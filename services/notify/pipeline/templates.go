package pipeline

import (
	"slices"

	"github.com/logbook/logbook/services/notify"
)

// The notification types the service knows. A request of any other type
// is refused (422): a type without a template could not be built.
//
// account_security and booking_cancelled are mandatory: users cannot opt
// out of them, neither globally nor per channel (notify.Policy); they go
// on every channel the user has an address for. The others follow the
// user's settings.
var (
	DefaultTemplates = notify.Templates{
		"event_waiting_list": {
			"en": {Title: "A place came free", Body: "{name}, a place on the waiting list of club {club} came free."},
			"nl": {Title: "Er is een plek vrij", Body: "{name}, er is een plek op de wachtlijst van club {club} vrijgekomen."},
		},
		"like_update": {
			"en": {Title: "New like", Body: "{name}, someone in club {club} liked your post."},
			"nl": {Title: "Nieuwe like", Body: "{name}, iemand in club {club} vond je bericht leuk."},
		},
		"club_announcement": {
			"en": {Title: "News from your club", Body: "{name}, club {club} has an announcement for you."},
		},
		"booking_cancelled": {
			"en": {Title: "Booking cancelled", Body: "{name}, your booking at club {club} was cancelled."},
			"nl": {Title: "Boeking geannuleerd", Body: "{name}, je boeking bij club {club} is geannuleerd."},
		},
		"account_security": {
			"en": {Title: "Security notice", Body: "{name}, there was a sign-in to your account of club {club}."},
		},
	}
	DefaultPolicy = notify.Policy{Mandatory: map[string]bool{"account_security": true, "booking_cancelled": true}}
)

// TypeInfo describes a notification type for clients (the send page).
type TypeInfo struct {
	Type      string   `json:"type"`
	Mandatory bool     `json:"mandatory"` // users cannot opt out of it
	Languages []string `json:"languages"`
}

func typeInfos(ts notify.Templates, p notify.Policy) []TypeInfo {
	out := make([]TypeInfo, 0, len(ts))
	for t, byLang := range ts {
		info := TypeInfo{Type: t, Mandatory: p.Mandatory[t]}
		for l := range byLang {
			info.Languages = append(info.Languages, l)
		}
		slices.Sort(info.Languages)
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b TypeInfo) int {
		if a.Type < b.Type {
			return -1
		}
		return 1
	})
	return out
}
