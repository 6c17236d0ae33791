package webhookauth

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/wrappers"
	"github.com/inplace-dev/inplace/webhook"
	"github.com/inplace-dev/inplace/webhook/certs"
)

// review is an AdmissionReview for a JobSet in namespace, as anyone who
// can reach the webhook could write one.
func review(namespace string) []byte {
	GinkgoHelper()
	js := wrappers.MakeJobSet("forged", namespace).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
	raw, err := json.Marshal(js)
	Expect(err).NotTo(HaveOccurred())
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "forged", Operation: admissionv1.Create, Namespace: namespace, Name: "forged",
			Kind:   metav1.GroupVersionKind{Group: jobset.GroupVersion.Group, Version: jobset.GroupVersion.Version, Kind: "JobSet"},
			Object: runtime.RawExtension{Raw: raw}},
	})
	Expect(err).NotTo(HaveOccurred())
	return body
}

// post sends a review straight to the validating webhook, with cert (PEM
// certificate and key) as the client certificate if set.
func post(cert ...[]byte) (*http.Response, error) {
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the server's identity is not under test here
	if len(cert) == 2 {
		pair, err := tls.X509KeyPair(cert[0], cert[1])
		Expect(err).NotTo(HaveOccurred())
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	return c.Post(fw.WebhookURL(webhook.ValidatePath), "application/json", bytes.NewReader(review("default")))
}

var _ = Describe("The webhooks with client authentication", func() {
	It("serve the apiserver, which presents its certificate", func() {
		js := wrappers.MakeJobSet("through-the-apiserver", "default").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		Expect(k8sClient.Create(ctx, js, client.DryRunAll)).To(Succeed())
		Expect(js.Spec.SuccessPolicy).NotTo(BeNil(), "the mutating webhook did not answer")
	})

	It("refuse a review sent straight to them, without a certificate or with another CA's", func() {
		_, err := post()
		Expect(err).To(HaveOccurred(), "a client without a certificate was served")
		other, err := certs.NewCA("someone-else")
		Expect(err).NotTo(HaveOccurred())
		cert, key, err := other.Sign(certs.Leaf{CommonName: "kube-apiserver", Client: true})
		Expect(err).NotTo(HaveOccurred())
		_, err = post(cert, key)
		Expect(err).To(HaveOccurred(), "a client certificate of another CA was accepted")

		// The same request with a certificate of the apiserver's CA: served.
		cert, key, err = clientCA.Sign(certs.Leaf{CommonName: "kube-apiserver", Client: true})
		Expect(err).NotTo(HaveOccurred())
		resp, err := post(cert, key)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
	})
})
