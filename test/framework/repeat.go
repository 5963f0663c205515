package framework

import (
	"sync"
	"time"
)

// Repeat runs each call in a goroutine of its own, again and again (n counts
// its calls from 0), each call after pause (none when pause is 0), until
// stop is called; stop returns once every goroutine has ended. A load that
// runs while a test changes something under it.
func Repeat(pause time.Duration, calls ...func(n int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				if pause > 0 {
					select {
					case <-done:
						return
					case <-time.After(pause):
					}
				} else {
					select {
					case <-done:
						return
					default:
					}
				}
				call(n)
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// AtOnce runs f(0) to f(n-1), each in a goroutine of its own, released
// together so that the calls race (a burst of concurrent requests), and
// returns once every call has.
func AtOnce(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}
