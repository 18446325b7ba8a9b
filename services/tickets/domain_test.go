package tickets

import (
	"errors"
	"testing"
)

var testCat = Catalogue{Sports: DefaultSports, PerSport: 500, Days: 10}

func TestCatalogueTicket(t *testing.T) {
	tk, err := testCat.Ticket("cycling.42")
	if err != nil || tk.Sport != "cycling" || tk.Day != 3 || tk.Seat != 5 || tk.ID != "cycling.42" {
		t.Fatalf("cycling.42 = %+v, %v", tk, err)
	}
	for _, bad := range []string{"", "cycling", "cycling.", "cycling.500", "cycling.-1", "cycling.042", "rowing.1", "cycling.1x", ".1"} {
		if _, err := testCat.Ticket(bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Ticket(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	if err := (Catalogue{Sports: []string{"a", "a"}, PerSport: 1, Days: 1}).Validate(); err == nil {
		t.Error("duplicate sport accepted")
	}
	if s := Sports(1000); len(s) != 1000 || s[0] != "athletics" || s[999] != "sport-0999" {
		t.Errorf("Sports(1000) = %v…", s[:4])
	}
	if err := (Catalogue{Sports: Sports(1000), PerSport: 500, Days: 10}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestDecide(t *testing.T) {
	free, _ := testCat.Ticket("athletics.7")
	held := Evolve(free, TicketBooked{Owner: "ann"})
	cases := []struct {
		name  string
		state Ticket
		cmd   Command
		want  []Event
		err   error
	}{
		{"book free", free, Book{"bob"}, []Event{TicketBooked{"bob"}}, nil},
		{"book taken", held, Book{"bob"}, nil, ErrTaken},
		{"book own", held, Book{"ann"}, nil, nil},
		{"return own", held, Return{"ann"}, []Event{TicketReturned{"ann"}}, nil},
		{"return other's", held, Return{"bob"}, nil, ErrNotHeld},
		{"return free", free, Return{"bob"}, nil, ErrNotHeld},
		{"bad owner", free, Book{""}, nil, ErrInvalid},
		{"bad owner 2", free, Book{"a\x00b"}, nil, ErrInvalid},
		{"unknown ticket", Ticket{ID: "x.1"}, Book{"bob"}, nil, ErrNotFound},
	}
	for _, c := range cases {
		got, err := Decide(c.state, c.cmd)
		if !errors.Is(err, c.err) || len(got) != len(c.want) || (len(got) == 1 && got[0] != c.want[0]) {
			t.Errorf("%s: Decide = %v, %v; want %v, %v", c.name, got, err, c.want, c.err)
		}
	}
	if errors.Is(ErrTaken, ErrNotHeld) || ErrTaken.Error() != "ticket is already booked" {
		t.Error("ErrTaken must not name the holder")
	}
	if Evolve(held, TicketReturned{"ann"}).Owner != "" {
		t.Error("return did not free the ticket")
	}
}
